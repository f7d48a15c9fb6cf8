// A driver older than the program's headers lacks entry points the program may still call. The
// shim forwards every call through CallReal (shim/hook_entry.h): such a call is answered
// CUDA_ERROR_NOT_SUPPORTED, as the driver itself would answer an unknown function, instead of
// calling a null pointer. Before, the memory hooks forwarded unchecked and the process died of
// SIGSEGV at its first cuMemFreeAsync. The driver here has only what gpuslice requires
// (tests/apps/partial_driver.cc).
#include <cuda.h>
#include <gtest/gtest.h>

#include <map>
#include <sstream>

#include "tests/support/broker_test_util.h"
#include "tests/support/subprocess.h"
#include "tests/support/test_env.h"

namespace gpuslice::testing {
namespace {

TEST(ShimMissingEntryPointsTest, CallsTheDriverLacksAreAnsweredNotSupportedNotCrashed) {
  BrokerTempDir dir;
  // Only these GPUSLICE_* variables: an inherited one (a CI script's) is refused by the shim.
  Subprocess app({BinDir() + "/gpuslice-test-missing-entry"},
                 {"LD_PRELOAD=" + ShimPath(), "GPUSLICE_DRIVER_LIBRARY=" + BinDir() + "/libgpuslice-partial-driver.so",
                  "GPUSLICE_STATE_DIR=" + dir.state_dir(), "GPUSLICE_TENANT=old-driver", "GPUSLICE_MEMORY_LIMIT=1Gi"},
                 Inherit::kAllButGpuslice);
  const ProcessResult r = app.Wait(60000);
  ASSERT_EQ(r.exit_code, 0) << "the program died (a null entry point called?):\n" << r.out << r.err;
  std::map<std::string, std::string> answers;
  std::istringstream lines(r.out);
  for (std::string name, value; lines >> name >> value;) answers[name] = value;
  EXPECT_EQ(answers["cuInit"], "0") << r.out;
  for (const char* name : {"cuMemFreeAsync", "cuMemRelease", "cuArrayDestroy", "cuMipmappedArrayDestroy",
                           "cuMemAllocAsync", "cuMemAlloc_v2", "cuArrayCreate_v2", "cuMemCreate"}) {
    EXPECT_EQ(answers[name], std::to_string(CUDA_ERROR_NOT_SUPPORTED)) << name << "\n" << r.out << r.err;
  }
}

}  // namespace
}  // namespace gpuslice::testing
