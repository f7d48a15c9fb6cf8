// No exception leaves a hook: new threads launching while every allocation gpuslice makes fails
// (tests/apps/heap_exhausted_launch_app.cc's injector) get error codes (CUDA_SUCCESS or
// CUDA_ERROR_OUT_OF_MEMORY), and the process lives — alone on the GPU, and sharing it, where a
// thread's first launch allocates its launch lane. Measured: the shim before this (a lane made
// with make_unique) aborted in std::terminate sharing the GPU; now 16 of 16 launches succeed
// (the threads launch on the shared lane). The same program without gpuslice is the harness's
// control.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "tests/support/shim_fixture.h"

namespace gpuslice::testing {
namespace {

using Json = nlohmann::json;

class ShimHeapExhaustedTest : public ShimTest {
 protected:
  static constexpr int kThreads = 16;

  // The app's result: the codes its threads' launches returned; null when it died.
  Json Launches(bool managed) {
    const std::vector<std::string> argv = {App("heap-exhausted-launch"), std::to_string(kThreads)};
    const ProcessResult r = managed ? RunShimmed(argv, {"GPUSLICE_TENANT=team"})
                                    : gpuslice::testing::Run(argv, {"LD_LIBRARY_PATH=" + SimLibDir()});
    EXPECT_EQ(r.signal, 0) << "the process died of signal " << r.signal << "\n" << Describe(r);
    EXPECT_EQ(r.exit_code, 0) << Describe(r);
    if (r.exit_code != 0) return Json();
    return ResultOf(r)["codes"];
  }

  static void ExpectOnlySuccessOrOutOfMemory(const Json& codes) {
    int total = 0;
    for (const auto& [name, n] : codes.items()) {
      EXPECT_TRUE(name == "CUDA_SUCCESS" || name == "CUDA_ERROR_OUT_OF_MEMORY") << name;
      total += n.get<int>();
    }
    EXPECT_EQ(total, kThreads) << codes.dump();
  }
};

TEST_F(ShimHeapExhaustedTest, WithoutTheShimEveryThreadsLaunchAnswers) {
  ExpectOnlySuccessOrOutOfMemory(Launches(false));
}

TEST_F(ShimHeapExhaustedTest, AloneEveryThreadsLaunchAnswersWithACode) {
  ExpectOnlySuccessOrOutOfMemory(Launches(true));
}

// Another tenant has the GPU open: every launch is tracked, and a thread's first one creates its
// lane. Before, one of the lane's allocations failing ended the process in std::terminate.
TEST_F(ShimHeapExhaustedTest, SharingTheGpuEveryThreadsLaunchAnswersWithACode) {
  auto other = StartShimmed({App("workload"), "compute", "--kernel-us", "500", "--depth", "2", "--duration", "30",
                             "--ready-line"},
                            {"GPUSLICE_TENANT=other"});
  ASSERT_TRUE(other->WaitForOutput("\"event\":\"ready\"", 30000)) << other->StderrSoFar();
  ExpectOnlySuccessOrOutOfMemory(Launches(true));
  other->Kill(SIGTERM);
  other->Wait();
}

}  // namespace
}  // namespace gpuslice::testing
