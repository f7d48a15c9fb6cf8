// A standard-class service beside a trainer: a request that finds the trainer holding the GPU
// waits for the trainer's minimum slice (the service is owed the GPU) and the drain of its queued
// work, which the budget bounds — not for the trainer's backlog. Target (docs/performance.md):
// p99 inflation about one quantum. (A latency-class service, which passes the grant, is
// sched_real_tenants_test's.)
#include "tests/support/sched_fixture.h"

namespace gpuslice::testing {
namespace {

using SchedLatencyTest = SchedTest;

// --- a trainer that queues a deep backlog ---
// A trainer that keeps 64 kernels of 2 ms in flight (PyTorch queues that far ahead when nothing
// synchronises) beside a standard-class service: one 500 us kernel every 40 ms. The service is
// owed the GPU, so the trainer's grant ends after its minimum slice, and the hand-over waits for
// the trainer's queued work to drain ("no overlap"). The budget holds that queue to 2 ms of work
// while another tenant shares the GPU, so a request waits for about a kernel or two; with the
// budget at its maximum (100 ms, set as `gpuslicectl set --budget 100ms` would) — the control —
// the trainer keeps 50 kernels queued and every request waits for them. The same control is the
// `no-budget` sabotage of scripts/mutation-check.sh (the queue never bounded: all 64 kernels).
const std::vector<std::string> kDeepQueueTrainer = {"compute", "--kernel-us", "2000", "--depth", "64",
                                                    "--duration", "60"};
const std::vector<std::string> kPeriodicService = {"latency", "--period-ms", "40", "--kernels-per-request", "1",
                                                   "--kernel-us", "500", "--duration", "4"};

struct ServiceFigures {
  double p99_ms = 1e9;
  int requests = 0;  // of 100 periods
};

ServiceFigures ServiceBesideDeepQueue(SchedLatencyTest* test, uint64_t budget_ns) {
  std::string error;
  EXPECT_TRUE(test->gpu().SetPolicy(broker::SharingMode::kTimeslice, 0, &error, budget_ns)) << error;
  EXPECT_NE(test->gpu().StartReady("trainer", kDeepQueueTrainer, SchedTest::Managed(50)), nullptr);
  Child* service = test->gpu().StartReady("service", kPeriodicService, SchedTest::Managed(50));
  EXPECT_NE(service, nullptr);
  ServiceFigures f;
  if (!service) return f;
  EXPECT_EQ(service->Wait(30000), 0) << service->Stderr();
  const auto result = service->Result();
  EXPECT_FALSE(result.is_null()) << service->Stdout();
  if (!result.is_null()) {
    f.p99_ms = result.value("p99_us", 1e9) / 1e3;
    f.requests = result.value("requests", 0);
  }
  std::printf("budget %s: service p99 %.2f ms, %d requests\n",
              budget_ns ? std::to_string(budget_ns / 1'000'000).append(" ms").c_str() : "default", f.p99_ms,
              f.requests);
  return f;
}

// Measured (6 runs each, load 3-4 from other builds): default budget p99 2.8-10.8 ms, every one of
// the 100 requests served; 100 ms budget 108-230 ms (9 runs), 33-36 requests; the `no-budget` sabotage
// 146 ms. A budget of half the control's still fails the bound.
constexpr double kDeepQueueP99AtMostMs = 25;

TEST_F(SchedLatencyTest, AServiceBesideADeepQueueWaitsForTheBudgetNotTheBacklog) {
  const ServiceFigures f = ServiceBesideDeepQueue(this, 0);
  EXPECT_LE(f.p99_ms, kDeepQueueP99AtMostMs);
  EXPECT_GE(f.requests, 95) << "every period served";
}

TEST_F(SchedLatencyTest, ControlWithTheLargestBudgetTheServiceWaitsForTheBacklog) {
  EXPECT_GT(ServiceBesideDeepQueue(this, 100'000'000).p99_ms, kDeepQueueP99AtMostMs);
}

}  // namespace
}  // namespace gpuslice::testing
