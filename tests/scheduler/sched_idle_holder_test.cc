// A tenant that holds the GPU but stops submitting does not hold up a tenant waiting for it:
// an idle holder hands the grant over at once, whether it exited or lives on idle.
// Here: the waiter gets >= 90% of the device while the other tenant is idle.
#include "tests/support/sched_fixture.h"

namespace gpuslice::testing {
namespace {

using SchedIdleHolderTest = SchedTest;

TEST_F(SchedIdleHolderTest, HolderThatExitsDoesNotHoldUpTheWaiter) {
  Child* leaver = Start("leaver", {"compute", "--kernel-us", "1000", "--depth", "2", "--duration", "1"}, Managed(50));
  ASSERT_NE(leaver, nullptr);
  ASSERT_NE(Start("stayer", kComputeBound, Managed(50)), nullptr);
  ASSERT_EQ(leaver->Wait(30000), 0) << leaver->Stderr();
  SleepFor(0.2);
  const auto [a, b] = Measure(2);
  EXPECT_GE(BusyFraction(a, b, "stayer"), 0.90);
}

TEST_F(SchedIdleHolderTest, IdleLivingHolderDoesNotHoldUpTheWaiter) {
  // One 1 ms kernel every 250 ms: the service holds the GPU after each request, then idles.
  ASSERT_NE(Start("service",
                  {"latency", "--period-ms", "250", "--kernels-per-request", "1", "--kernel-us", "1000", "--duration",
                   "60"},
                  Managed(50)),
            nullptr);
  ASSERT_NE(Start("trainer", kComputeBound, Managed(50)), nullptr);
  SleepFor(0.5);
  const auto [a, b] = Measure(3);
  EXPECT_GE(BusyFraction(a, b, "trainer"), 0.90);
  EXPECT_GT(BusyFraction(a, b, "service"), 0.0) << "the service still gets its requests through";
}

}  // namespace
}  // namespace gpuslice::testing
