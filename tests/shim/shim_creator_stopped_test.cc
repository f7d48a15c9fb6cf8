// A process stopped while it creates the state file (SIGSTOP, a debugger, a container paused
// mid-start) holds the file's creation lock. Creating takes milliseconds; on the landed code
// every newcomer waited for that lock for ever: a tenant's cuInit, `gpuslicectl status` and an
// exporter scrape hung. Now the lock is waited for at most 2 s: the tenant fails closed (its
// allocations refused with the shim's own error) with one line naming the file, and gpuslicectl
// says the same and exits. Once the creator is gone, the next process initialises the file.
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>

#include "broker/segment_layout.h"
#include "tests/support/shim_fixture.h"

namespace gpuslice::testing {
namespace {

using Clock = std::chrono::steady_clock;

class ShimCreatorStoppedTest : public ShimTest {
 protected:
  // A state file sized but without its magic, its creation lock held by this test process (on a
  // descriptor of its own, as a stopped creator's would be).
  int StopCreatorHalfway() {
    std::filesystem::create_directories(state_dir());
    const std::string path = state_dir() + "/" + broker::kStateFileName;
    const int fd = open(path.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0660);
    EXPECT_GE(fd, 0) << path;
    EXPECT_EQ(ftruncate(fd, sizeof(broker::Segment)), 0);
    EXPECT_EQ(flock(fd, LOCK_EX), 0);
    return fd;
  }
};

TEST_F(ShimCreatorStoppedTest, ATenantFailsClosedWithinTheBoundAndGpuslicectlTooThenTheFileIsCreated) {
  const int creator = StopCreatorHalfway();
  const auto start = Clock::now();
  const ProcessResult r =
      RunShimmed(kDirect.Command("alloc", {"--chunk", "64Mi", "--count", "1"}), {"GPUSLICE_MEMORY_LIMIT=1Gi"}, 20000);
  const double took = std::chrono::duration<double>(Clock::now() - start).count();
  EXPECT_LT(took, 8) << "bounded: the creator is waited for 2 s, not for ever";
  const Json result = ResultOf(r);
  EXPECT_EQ(result.value("allocated", -1), 0) << Describe(r);
  EXPECT_EQ(result["refusals"], Json({{"CUDA_ERROR_NOT_PERMITTED", 1}})) << r.out;
  EXPECT_NE(r.err.find("creation lock for 2 s"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(state_dir()), std::string::npos) << "the line names the file: " << r.err;

  const auto ctl_start = Clock::now();
  const ProcessResult status =
      gpuslice::testing::Run({BinDir() + "/gpuslicectl", "status", "--state-dir", state_dir()}, {}, 20000);
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - ctl_start).count(), 8);
  EXPECT_EQ(status.exit_code, 1) << status.out << status.err;
  EXPECT_NE(status.err.find("creation lock"), std::string::npos) << status.err;

  close(creator);  // the creator is gone: its lock with it
  const ProcessResult after =
      RunShimmed(kDirect.Command("alloc", {"--chunk", "64Mi", "--count", "1"}), {"GPUSLICE_MEMORY_LIMIT=1Gi"});
  EXPECT_EQ(ResultOf(after).value("allocated", -1), 1) << Describe(after);
}

}  // namespace
}  // namespace gpuslice::testing
