// Tenants coming and going: a newcomer gets its share at once without catching up on the time
// it was absent (idle credit is bounded), and a leaver's share goes to those who stay.
#include <signal.h>

#include "tests/support/sched_fixture.h"

namespace gpuslice::testing {
namespace {

using SchedChurnTest = SchedTest;

TEST_F(SchedChurnTest, TenantsComingAndGoingGetFairSharesInEveryPhase) {
  Child* first = Start("a", kComputeBound, Managed(30));
  ASSERT_NE(first, nullptr);
  ASSERT_NE(Start("b", kComputeBound, Managed(30)), nullptr);
  SleepFor(0.5);
  const auto [a1, b1] = Measure(2);
  ASSERT_NE(Start("c", kComputeBound, Managed(30)), nullptr);  // arrives
  SleepFor(0.3);
  const auto [a2, b2] = Measure(2.5);
  first->Kill(SIGTERM);  // leaves
  first->Wait(10000);
  SleepFor(0.3);
  const auto [a3, b3] = Measure(2);

  const auto phase1 = SharesBetween(a1, b1);
  EXPECT_NEAR(phase1.at("a"), 0.5, 0.08) << DescribeShares(phase1);
  EXPECT_NEAR(phase1.at("b"), 0.5, 0.08) << DescribeShares(phase1);
  const auto phase2 = SharesBetween(a2, b2);
  for (const char* t : {"a", "b", "c"}) EXPECT_NEAR(phase2.at(t), 1.0 / 3, 0.08) << t << ": " << DescribeShares(phase2);
  const auto phase3 = SharesBetween(a3, b3);
  EXPECT_NEAR(phase3.at("b"), 0.5, 0.08) << DescribeShares(phase3);
  EXPECT_NEAR(phase3.at("c"), 0.5, 0.08) << DescribeShares(phase3);
  EXPECT_LT(phase3.at("a"), 0.01) << "the leaver is gone";
  for (const auto& [x, y] : {std::pair{a1, b1}, std::pair{a2, b2}, std::pair{a3, b3}})
    EXPECT_GE(BusyFraction(x, y), 0.85) << "the GPU must stay busy through arrivals and departures";
}

}  // namespace
}  // namespace gpuslice::testing
