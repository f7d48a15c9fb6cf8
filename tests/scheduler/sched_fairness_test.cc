// Weighted fair sharing among busy tenants: equal requests get equal device time (Jain's index
// over the shares), unequal requests get device time in proportion.
//
// The tenants have unequal appetites, as real ones do: a synchronous launcher (launch, wait,
// launch), a data-parallel job of two processes, a trainer that keeps eight kernels queued. The
// simulated GPU alone, like a real one, gives every *process* a turn and the queue-keeper the
// gaps a synchronous launcher leaves, so without gpuslice these tenants do not get equal time:
// each scenario has a control, the same processes unmanaged, that fails the same assertion.
//
// Targets (docs/performance.md): Jain >= 0.99, shares within ±2 pp over 10 s windows; here, over
// a few seconds on a possibly busy CI machine: Jain >= 0.97, ±6 pp (spreads measured below).
#include "tests/support/sched_fixture.h"

namespace gpuslice::testing {
namespace {

using SchedFairnessTest = SchedTest;

// A synchronous launcher: one 1 ms kernel at a time, the next launched when it completes.
const std::vector<std::string> kSynchronous = {"compute", "--kernel-us", "1000", "--depth", "1", "--duration", "120"};
// A trainer that keeps eight 2 ms kernels queued.
const std::vector<std::string> kEightQueued = {"compute", "--kernel-us", "2000", "--depth", "8", "--duration", "120"};

struct Member {
  std::string tenant;
  int request_pct;
  const std::vector<std::string>* workload;
  int processes = 1;
};

// Starts every member's processes (managed with its request, or unmanaged), waits half a
// second, and returns each tenant's share of the device time over `seconds`.
std::map<std::string, double> SharesOf(SchedTest* test, const std::vector<Member>& members, bool managed,
                                       double seconds) {
  for (const Member& m : members) {
    for (int i = 0; i < m.processes; ++i) {
      const StartOptions options = managed ? SchedTest::Managed(m.request_pct) : SchedTest::Unmanaged();
      if (!test->gpu().StartReady(m.tenant, *m.workload, options)) {
        ADD_FAILURE() << m.tenant << " did not start";
        return {};
      }
    }
  }
  SleepFor(0.5);
  const Sample a = test->gpu().Take();
  SleepFor(seconds);
  const Sample b = test->gpu().Take();
  const auto shares = SharesBetween(a, b);
  std::printf("%s: %s\n", managed ? "gpuslice" : "unmanaged", DescribeShares(shares).c_str());
  EXPECT_GE(BusyFraction(a, b), 0.85) << "the GPU must be kept busy";
  return shares;
}

double JainOf(const std::map<std::string, double>& shares) {
  std::vector<double> x;
  for (const auto& [tenant, share] : shares) x.push_back(share);
  return x.empty() ? 0 : Jain(x);
}

// True when every entitled tenant's share is within `margin` of its entitlement.
bool SharesMatch(const std::map<std::string, double>& shares, const std::map<std::string, double>& entitled,
                 double margin) {
  for (const auto& [tenant, expected] : entitled) {
    if (!shares.count(tenant) || std::abs(shares.at(tenant) - expected) > margin) return false;
  }
  return true;
}

constexpr double kJainAtLeast = 0.97;
constexpr double kShareMargin = 0.06;

// --- two tenants, equal requests: a synchronous service and a two-process job ---
// Unmanaged the job's two processes take turns with the service's one, and the service leaves
// the GPU empty between kernels: it gets about a fifth. Measured (3 runs each, load 4-5):
// gpuslice service 0.466-0.471 (Jain 0.997); unmanaged 0.211-0.212 (Jain 0.75).
const std::vector<Member> kServiceAndJob = {{"service", 50, &kSynchronous}, {"job", 50, &kComputeBound, 2}};

TEST_F(SchedFairnessTest, TwoTenantsWithEqualRequestsGetEqualTime) {
  const auto shares = SharesOf(this, kServiceAndJob, true, 4);
  ASSERT_EQ(shares.size(), 2u);
  EXPECT_GE(JainOf(shares), kJainAtLeast) << DescribeShares(shares);
}

TEST_F(SchedFairnessTest, ControlWithoutGpusliceTheTwoTenantsGetUnequalTime) {
  EXPECT_LT(JainOf(SharesOf(this, kServiceAndJob, false, 3)), kJainAtLeast);
}

// --- four tenants, equal requests, four appetites ---
// Measured (3 runs each, load 4-5): gpuslice 0.222-0.267 each (Jain 0.996); unmanaged the job
// 0.44, the service 0.11-0.12 (Jain 0.82).
const std::vector<Member> kFourShapes = {{"bound", 25, &kComputeBound},
                                         {"job", 25, &kComputeBound, 2},
                                         {"service", 25, &kSynchronous},
                                         {"trainer", 25, &kEightQueued}};

TEST_F(SchedFairnessTest, FourTenantsWithEqualRequestsGetEqualTime) {
  const auto shares = SharesOf(this, kFourShapes, true, 5);
  ASSERT_EQ(shares.size(), 4u);
  EXPECT_GE(JainOf(shares), kJainAtLeast) << DescribeShares(shares);
}

TEST_F(SchedFairnessTest, ControlWithoutGpusliceTheFourTenantsGetUnequalTime) {
  EXPECT_LT(JainOf(SharesOf(this, kFourShapes, false, 3)), kJainAtLeast);
}

// --- unequal requests ---
// Unmanaged, the same processes get equal time whatever they request (the control). Measured (3
// runs each): gpuslice a 0.747-0.750; unmanaged 0.496-0.504; 50/30/20: a 0.501-0.510, c 0.193-0.203.
const std::vector<Member> k75And25 = {{"a", 75, &kComputeBound}, {"b", 25, &kComputeBound}};

TEST_F(SchedFairnessTest, Requests75And25GetThreeToOne) {
  const auto shares = SharesOf(this, k75And25, true, 5);
  EXPECT_TRUE(SharesMatch(shares, {{"a", 0.75}, {"b", 0.25}}, kShareMargin)) << DescribeShares(shares);
}

TEST_F(SchedFairnessTest, ControlWithoutGpusliceRequestsChangeNothing) {
  EXPECT_FALSE(SharesMatch(SharesOf(this, k75And25, false, 3), {{"a", 0.75}, {"b", 0.25}}, kShareMargin));
}

// Three requests: their control is the one above (unmanaged, 1/3 each misses 0.5 and 0.2 by more
// than the margin), and the `weights-ignored` sabotage of scripts/mutation-check.sh.
TEST_F(SchedFairnessTest, Requests50And30And20GetTheirProportions) {
  const auto shares =
      SharesOf(this, {{"a", 50, &kComputeBound}, {"b", 30, &kComputeBound}, {"c", 20, &kComputeBound}}, true, 6);
  EXPECT_TRUE(SharesMatch(shares, {{"a", 0.5}, {"b", 0.3}, {"c", 0.2}}, kShareMargin)) << DescribeShares(shares);
}

// 80 + 80: oversubscribed requests are weights, so each tenant gets half, however many processes
// it runs; unmanaged the two-process tenant gets two thirds (the control). Measured (3 runs each):
// gpuslice a 0.481-0.491; unmanaged 0.328-0.336.
const std::vector<Member> kOversubscribed = {{"a", 80, &kComputeBound}, {"b", 80, &kComputeBound, 2}};

TEST_F(SchedFairnessTest, RequestsOver100PercentAreSharedInProportion) {
  const auto shares = SharesOf(this, kOversubscribed, true, 3);
  EXPECT_TRUE(SharesMatch(shares, {{"a", 0.5}, {"b", 0.5}}, kShareMargin)) << DescribeShares(shares);
}

TEST_F(SchedFairnessTest, ControlWithoutGpusliceOversubscribedProcessesTakeTurns) {
  EXPECT_FALSE(SharesMatch(SharesOf(this, kOversubscribed, false, 3), {{"a", 0.5}, {"b", 0.5}}, kShareMargin));
}

}  // namespace
}  // namespace gpuslice::testing
