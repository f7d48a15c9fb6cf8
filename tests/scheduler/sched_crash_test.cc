// A tenant killed while it holds the GPU does not keep it: the waiting tenant takes the grant
// over as soon as it sees the holder dead (its process's liveness lock is gone).
#include <signal.h>

#include "tests/support/sched_fixture.h"

namespace gpuslice::testing {
namespace {

using SchedCrashTest = SchedTest;

TEST_F(SchedCrashTest, HolderKilledMidGrantReleasesTheGpuAtOnce) {
  Child* victim = Start("victim", kComputeBound, Managed(50));
  ASSERT_NE(victim, nullptr);
  Child* survivor = Start("survivor", kComputeBound, Managed(50));
  ASSERT_NE(survivor, nullptr);
  SleepFor(0.5);
  // Wait until the victim is on the device, with the survivor waiting for the grant.
  ASSERT_TRUE(Eventually([&] { return gpu().Take().running_pid == victim->pid(); }, std::chrono::seconds(5)));
  const uint64_t before = gpu().Take().by_pid[survivor->pid()].kernels;
  const uint64_t killed_at = fairness::NowNs();
  victim->Kill(SIGKILL);
  uint64_t resumed_at = 0;
  while (fairness::NowNs() - killed_at < 2'000'000'000ULL) {
    if (gpu().Take().by_pid[survivor->pid()].kernels > before + 1) {
      resumed_at = fairness::NowNs();
      break;
    }
    SleepFor(0.0005);
  }
  ASSERT_NE(resumed_at, 0u) << "the survivor never continued";
  // Two more of its 1 ms kernels done: it went on within the bound (up to a quantum of waiting
  // included, had the victim's quantum just begun).
  EXPECT_LE((resumed_at - killed_at) / 1e6, 100.0);
  victim->Wait(5000);
  const auto [a, b] = Measure(1);
  EXPECT_GE(BusyFraction(a, b, "survivor"), 0.85) << "the survivor has the GPU to itself";
}

}  // namespace
}  // namespace gpuslice::testing
