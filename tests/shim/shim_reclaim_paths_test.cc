// The shim's own reclaim path: an application that polls free memory (cuMemGetInfo, or NVML as
// nvidia-smi and pynvml read it) sees a dead process's memory returned to its tenant, before it
// allocates anything (hooks_memory_info.cc reaps at most every 100 ms). The other reclaim paths
// are listed in broker_reclaim_paths_test.cc. Here the first thing the new process does is ask,
// so only this path can have returned the dead holder's 1 GiB: without it, the answer is 0 free
// (or 1 GiB used), as the controls while the holder lives show.
#include <signal.h>

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/support/shim_fixture.h"

namespace gpuslice::testing {
namespace {

const std::vector<std::string> kTeam = {"GPUSLICE_TENANT=team", "GPUSLICE_MEMORY_LIMIT=1Gi"};

class ShimReclaimPathsTest : public ShimTest {
 protected:
  // A process of the team that holds the whole quota.
  std::unique_ptr<Subprocess> WholeQuotaHolder() {
    auto holder = StartHolder({App("direct"), "alloc", "--chunk", "256Mi", "--count", "4"}, kTeam);
    EXPECT_EQ(TenantUsed("team"), kGi);
    return holder;
  }
  static void KillAndWait(Subprocess& p) {
    p.Kill(SIGKILL);
    EXPECT_EQ(p.Wait().signal, SIGKILL);
  }
  // The free memory a new process of the team reads with cuMemGetInfo before it allocates.
  uint64_t FreeSeenFirst() {
    const ProcessResult r = RunShimmed({App("direct"), "alloc", "--chunk", "256Mi", "--count", "1"}, kTeam);
    EXPECT_EQ(r.exit_code, 0) << Describe(r);
    return ResultOf(r)["mem_before"].value("free", uint64_t{12345});
  }
  // The memory NVML reports used by the team, read by a new process that never allocates.
  uint64_t NvmlUsed() {
    const ProcessResult r = RunShimmed({App("dlsym"), "nvml"}, kTeam);
    EXPECT_EQ(r.exit_code, 0) << Describe(r);
    return EventOf(r.out, "nvml")["v2"].value("used", uint64_t{12345});
  }
};

TEST_F(ShimReclaimPathsTest, MemGetInfoOfTheNextProcessCountsADeadHoldersMemoryAsFree) {
  auto holder = WholeQuotaHolder();
  EXPECT_EQ(FreeSeenFirst(), 0u) << "control: while the holder lives nothing is free";
  KillAndWait(*holder);
  EXPECT_EQ(FreeSeenFirst(), kGi) << "the dead holder's 1 GiB was not returned";
}

TEST_F(ShimReclaimPathsTest, NvmlOfTheNextProcessNoLongerCountsADeadHoldersMemory) {
  auto holder = WholeQuotaHolder();
  EXPECT_EQ(NvmlUsed(), kGi) << "control: while the holder lives its 1 GiB is used";
  KillAndWait(*holder);
  EXPECT_EQ(NvmlUsed(), 0u) << "the dead holder's 1 GiB is still counted";
}

}  // namespace
}  // namespace gpuslice::testing
