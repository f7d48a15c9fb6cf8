// Device time is shared per tenant, not per process: two processes of tenant A and one of
// tenant B, with equal requests, get A ≈ B — where the hardware alone (and gpuslice with the
// GPU's sharing mode set to none) gives every process a turn, so A ≈ 2 × B.
#include "tests/support/sched_fixture.h"

namespace gpuslice::testing {
namespace {

using SchedMultiprocessTest = SchedTest;

double ShareOfTwoProcessTenant(SchedTest* test, const StartOptions& options, double seconds) {
  for (const char* t : {"a", "a", "b"}) {
    if (!test->gpu().StartReady(t, kComputeBound, options)) {
      ADD_FAILURE() << t << " did not start";
      return -1;
    }
  }
  SleepFor(0.5);
  const Sample a = test->gpu().Take();
  SleepFor(seconds);
  const Sample b = test->gpu().Take();
  const auto shares = SharesBetween(a, b);
  EXPECT_GE(BusyFraction(a, b), 0.85);
  return shares.count("a") ? shares.at("a") : -1;
}

TEST_F(SchedMultiprocessTest, ProcessesOfOneTenantShareItsTime) {
  EXPECT_NEAR(ShareOfTwoProcessTenant(this, Managed(50), 4), 0.5, 0.07) << "A's two processes together ≈ B";
}

TEST_F(SchedMultiprocessTest, UnmanagedHardwareGivesEveryProcessATurn) {
  // The baseline the test above improves on.
  EXPECT_NEAR(ShareOfTwoProcessTenant(this, Unmanaged(), 3), 2.0 / 3, 0.07) << "A ≈ 2 × B without gpuslice";
}

TEST_F(SchedMultiprocessTest, ModeNoneDoesNotGateLaunches) {
  std::string error;
  ASSERT_TRUE(gpu().SetPolicy(broker::SharingMode::kNone, 0, &error)) << error;
  EXPECT_NEAR(ShareOfTwoProcessTenant(this, Managed(50), 3), 2.0 / 3, 0.07) << "no gating: the hardware's turns";
}

}  // namespace
}  // namespace gpuslice::testing
