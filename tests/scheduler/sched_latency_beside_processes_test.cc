// A latency-class service beside a co-runner of several processes (docs/scheduling.md, the
// latency class's contract, point 3): a request waits for one co-runner kernel and at most 1 ms of
// queue, whoever's — not for a kernel of each process. Without gpuslice, each of the co-runner's
// processes keeps its queue full, the hardware turns between their contexts and the service's,
// and a request that arrives waits for a timeslice (2 ms here) of each of them before its turn.
// Under gpuslice the processes share one prediction of the GPU's queued work
// (GpuEntry::queue_drain_at_ns), so one of their kernels runs at a time and a request waits for
// one timeslice at most. The control is the same processes unmanaged, which fails the same bound;
// the `queue-counted-per-process` sabotage of scripts/mutation-check.sh (each process its own
// prediction) fails it too.
//
// Judged at the 90th percentile: the p99 of 200 requests is their second worst, and with five
// simulated processes on a 2-core host it is a host hiccup's figure (measured under gpuslice,
// quiet machine: p99 3.2 to 15.7 ms between runs while p90 stayed at 2.3-2.6 ms).
#include <fstream>

#include "tests/support/sched_fixture.h"

namespace gpuslice::testing {
namespace {

using SchedLatencyBesideProcessesTest = SchedTest;

StartOptions Latency(int request_pct) {
  StartOptions options = SchedTest::Managed(request_pct);
  options.env.push_back("GPUSLICE_COMPUTE_CLASS=latency");
  return options;
}

// One request of one 500 us kernel every 20 ms: well within its request (30).
const std::vector<std::string> kService = {"latency", "--period-ms", "20", "--kernels-per-request", "1", "--kernel-us",
                                           "500",     "--duration",  "4"};
// Four processes of one tenant (request 70), each keeping eight 4 ms kernels in flight.
constexpr int kCoRunnerProcesses = 4;
const std::vector<std::string> kCoRunner = {"compute", "--kernel-us", "4000", "--depth", "8", "--duration", "60"};

std::string ReadLoadAverage() {
  std::ifstream in("/proc/loadavg");
  std::string one, five, fifteen;
  in >> one >> five >> fifteen;
  return one + " " + five + " " + fifteen;
}

double ServiceP90Ms(Child* service) {
  if (!service) return 1e9;
  EXPECT_EQ(service->Wait(30000), 0) << service->Stderr();
  const auto result = service->Result();
  EXPECT_FALSE(result.is_null()) << service->Stdout();
  return result.is_null() ? 1e9 : result.value("p90_us", 1e9) / 1e3;
}

// The service alone, in the same test: a loaded host makes every wake-up late, alone as beside
// the co-runner, so the bound starts from what this host gives now.
double AloneP90Ms(SchedLatencyBesideProcessesTest* test) {
  const double p90 = ServiceP90Ms(test->gpu().StartReady("service-alone", kService, Latency(30)));
  std::printf("alone: service p90 %.2f ms\n", p90);
  return p90;
}

struct Figures {
  double p90_ms = 1e9;
  double corunner_busy = 0;
};

Figures ServiceBesideProcesses(SchedLatencyBesideProcessesTest* test, bool managed) {
  const StartOptions corunner = managed ? SchedTest::Managed(70) : SchedTest::Unmanaged();
  for (int i = 0; i < kCoRunnerProcesses; ++i)
    EXPECT_NE(test->gpu().StartReady("corunner", kCoRunner, corunner), nullptr);
  Child* service = test->gpu().StartReady("service", kService, managed ? Latency(30) : SchedTest::Unmanaged());
  EXPECT_NE(service, nullptr);
  const Sample a = test->gpu().Take();
  Figures f;
  f.p90_ms = ServiceP90Ms(service);
  const Sample b = test->gpu().Take();
  f.corunner_busy = BusyFraction(a, b, "corunner");
  std::printf("%s: service p90 %.2f ms; co-runner busy %.3f\n", managed ? "gpuslice" : "unmanaged", f.p90_ms,
              f.corunner_busy);
  return f;
}

// One co-runner timeslice (2 ms) and the 1 ms of queue the contract allows, plus 1 ms for a loaded
// host; four processes' turns are 8 ms. Measured (2-core machine, quiet): gpuslice p90 2.3-2.6 ms,
// alone 0.5-0.8; unmanaged 8.1 ms, and 6.1-10.2 ms with each process its own prediction.
constexpr double kOneTurnAndQueueMs = 3.0;
constexpr double kHostSlackMs = 1.0;

TEST_F(SchedLatencyBesideProcessesTest, ARequestWaitsForOneCoRunnerKernelNotOneEachProcess) {
  const double bound_ms = AloneP90Ms(this) + kOneTurnAndQueueMs + kHostSlackMs;
  const Figures f = ServiceBesideProcesses(this, true);
  EXPECT_LE(f.p90_ms, bound_ms) << "load average: " << ReadLoadAverage();
  EXPECT_GE(f.corunner_busy, 0.8) << "one kernel at a time still keeps the device busy (unmanaged: about 0.97)";
}

TEST_F(SchedLatencyBesideProcessesTest, ControlUnmanagedARequestWaitsForATurnOfEachProcess) {
  const double bound_ms = AloneP90Ms(this) + kOneTurnAndQueueMs + kHostSlackMs;
  EXPECT_GT(ServiceBesideProcesses(this, false).p90_ms, bound_ms);
}

}  // namespace
}  // namespace gpuslice::testing
