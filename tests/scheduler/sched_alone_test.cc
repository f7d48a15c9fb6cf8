// A tenant alone on the GPU: its request is a floor, not a ceiling (it gets the idle time);
// its limit is a ceiling even when the GPU is otherwise idle; and arriving at an idle GPU it
// is granted the GPU at once, and reaches its limit, not stalling after its grants.
// Targets (docs/performance.md): alone >= 97% of device time, limit 30 -> <= 32%, first grant
// <= 1 ms (p99); here, with CI margins: >= 90%, 15..35%, first kernel done within 50 ms.
#include <algorithm>
#include <cstdio>

#include "tests/support/sched_fixture.h"

namespace gpuslice::testing {
namespace {

using SchedAloneTest = SchedTest;

TEST_F(SchedAloneTest, TenantAloneWithRequest25GetsTheWholeGpu) {
  ASSERT_NE(Start("alone", kComputeBound, Managed(25)), nullptr);
  SleepFor(0.5);
  const auto [a, b] = Measure(3);
  EXPECT_GE(BusyFraction(a, b, "alone"), 0.90);
}

TEST_F(SchedAloneTest, LimitCapsATenantAloneOnAnIdleGpu) {
  ASSERT_NE(Start("capped", kComputeBound, Managed(25, 30)), nullptr);
  SleepFor(0.5);
  const auto [a, b] = Measure(4);
  const double busy = BusyFraction(a, b, "capped");
  EXPECT_LE(busy, 0.35);
  EXPECT_GE(busy, 0.15) << "a limit of 30% must still let the tenant run";
}

// A limit is a ceiling the tenant reaches: a grant longer than the bucket holds (90 ms at 90%,
// run dry after 900 ms held) owes only what it ran past the limit. Charged as if the bucket had
// gained nothing while the grant ran, it owed some 700 ms more and stalled to repay it after each
// long grant (gpuslice-bench alone-limit-90: 86.2% of the device over 20 s).
TEST_F(SchedAloneTest, AHighLimitAloneIsReachedNotStalledAfterItsGrants) {
  ASSERT_NE(Start("limited", {"compute", "--kernel-us", "5000", "--depth", "2", "--duration", "60"}, Managed(90, 90)),
            nullptr);
  SleepFor(0.5);
  const auto [a, b] = Measure(4);
  const double busy = BusyFraction(a, b, "limited");
  EXPECT_GE(busy, 0.84) << "a limit of 90% alone on the GPU";
  EXPECT_LE(busy, 0.95);
}

TEST_F(SchedAloneTest, NewTenantAtAnIdleGpuIsGrantedAtOnce) {
  // A tenant used the GPU and left: the grant is still with it. Each arrival is a new tenant,
  // so each must take the grant over from the previous, departed one. The workload's elapsed_s
  // runs from just before its first launch to the end of the synchronisation after it.
  ASSERT_FALSE(gpu().RunToEnd("previous", {"compute", "--kernels", "20"}, Managed(50)).is_null());
  std::vector<double> elapsed_ms;
  for (int i = 0; i < 20; ++i) {
    const auto result = gpu().RunToEnd("arrival-" + std::to_string(i),
                                       {"compute", "--kernels", "1", "--kernel-us", "100"}, Managed(50));
    ASSERT_FALSE(result.is_null()) << "arrival " << i << " failed";
    elapsed_ms.push_back(result.value("elapsed_s", 1.0) * 1e3);
  }
  std::sort(elapsed_ms.begin(), elapsed_ms.end());
  std::string all;
  for (double ms : elapsed_ms) all += std::to_string(ms) + " ";
  // One outlier is the machine's, not the scheduler's; two are not.
  EXPECT_LE(elapsed_ms[18], 50.0) << "first kernel done after (ms): " << all;
  EXPECT_LE(elapsed_ms[19], 250.0) << "first kernel done after (ms): " << all;
  std::printf("first 100 us kernel done after (ms, sorted): %s\n", all.c_str());
}

}  // namespace
}  // namespace gpuslice::testing
