// The compute scheduler with tenants shaped like real programs: a synchronous launcher (launch,
// wait, launch), a periodic latency service, a background batch job, a process stopped while it
// holds the GPU, waiters that die. Each scenario that the simulated GPU would pass on its own
// has a control — the same processes without gpuslice — that must fail the same assertion; the
// others (stop, dying waiters) are scenarios the old scheduler failed, and scripts/mutation-check.sh
// shows which sabotage of the scheduler each one catches.
//
// Bounds come from repeated runs on the 2-core build machine (spreads in the comments), wide
// enough for a loaded CI run and narrow enough that a halved effect fails.
#include <signal.h>

#include <algorithm>
#include <fstream>

#include "tests/support/sched_fixture.h"

namespace gpuslice::testing {
namespace {

using SchedRealTenantsTest = SchedTest;

// /proc/loadavg's first three fields, for a failure's message: a latency bound missed on a loaded
// host reads differently from one missed on a quiet host.
std::string ReadLoadAverage() {
  std::ifstream in("/proc/loadavg");
  std::string one, five, fifteen;
  in >> one >> five >> fifteen;
  return one + " " + five + " " + fifteen;
}

StartOptions WithClass(StartOptions options, const std::string& compute_class) {
  options.env.push_back("GPUSLICE_COMPUTE_CLASS=" + compute_class);
  return options;
}

// --- a synchronous launcher beside one that keeps eight kernels queued ---
// Unmanaged, the hardware gives the queue-keeping process most of the GPU: the synchronous one
// leaves it empty between its kernels and waits a whole timeslice to come back. Under gpuslice,
// with requests 70 (synchronous) and 30, the synchronous tenant must get its 70%: the gaps
// between its kernels are not idleness, and the other's queue is held to the budget.
const std::vector<std::string> kSynchronous = {"compute", "--kernel-us", "2000", "--depth", "1", "--duration", "60"};
const std::vector<std::string> kEightQueued = {"compute", "--kernel-us", "2000", "--depth", "8", "--duration", "60"};

double SynchronousShare(SchedRealTenantsTest* test, bool managed) {
  StartOptions sync = managed ? SchedTest::Managed(70) : SchedTest::Unmanaged();
  StartOptions queued = managed ? SchedTest::Managed(30) : SchedTest::Unmanaged();
  EXPECT_NE(test->gpu().StartReady("sync", kSynchronous, sync), nullptr);
  EXPECT_NE(test->gpu().StartReady("queued", kEightQueued, queued), nullptr);
  SleepFor(0.5);
  const Sample a = test->gpu().Take();
  SleepFor(4);
  const Sample b = test->gpu().Take();
  const auto shares = SharesBetween(a, b);
  std::printf("%s: shares %s\n", managed ? "gpuslice" : "unmanaged", DescribeShares(shares).c_str());
  return shares.count("sync") ? shares.at("sync") : 0;
}

// Measured (5 runs each, loaded machine): gpuslice 0.66-0.70; unmanaged 0.35-0.45.
constexpr double kSynchronousShareAtLeast = 0.58;

TEST_F(SchedRealTenantsTest, ASynchronousLauncherGetsItsRequestBesideATenantThatQueuesEightKernels) {
  EXPECT_GE(SynchronousShare(this, true), kSynchronousShareAtLeast);
}

TEST_F(SchedRealTenantsTest, ControlWithoutGpusliceTheSynchronousLauncherGetsLess) {
  EXPECT_LT(SynchronousShare(this, false), kSynchronousShareAtLeast);
}

// --- a latency-class service beside a trainer ---
// The service (request 30, a request of three 300 us kernels every 10 ms) is of class latency:
// its launches pass the trainer's grant, whose queue is held to one kernel, so a request waits
// only for the trainer's running kernel to be time-sliced with it. On this simulated GPU that is
// what the hardware's 2 ms time-slicing gives without gpuslice too (measured: p99 3.1 ms either
// way, alone 1.1 ms; docs/performance.md), so the control is the class policy itself: the same
// service declared `background` is never granted the GPU while the trainer wants it.
const std::vector<std::string> kService = {"latency", "--period-ms", "10", "--kernels-per-request", "3", "--kernel-us",
                                           "300",     "--duration",  "4"};
const std::vector<std::string> kTrainer = {"compute", "--kernel-us", "4000", "--depth", "8", "--duration", "60"};

struct ServiceFigures {
  double p99_ms = 1e9;
  double other_busy = 0;
  int requests = 0;
};

ServiceFigures ServiceBesideTrainer(SchedRealTenantsTest* test, bool managed, const std::string& service_class,
                                    const std::vector<std::string>& service_args = kService,
                                    const std::vector<std::string>& trainer_args = kTrainer) {
  ServiceFigures f;
  const StartOptions trainer = managed ? SchedTest::Managed(70) : SchedTest::Unmanaged();
  const StartOptions service = managed ? WithClass(SchedTest::Managed(30), service_class) : SchedTest::Unmanaged();
  EXPECT_NE(test->gpu().StartReady("trainer", trainer_args, trainer), nullptr);
  Child* svc = test->gpu().StartReady("service", service_args, service);
  EXPECT_NE(svc, nullptr);
  if (!svc) return f;
  const Sample a = test->gpu().Take();
  // A starved background service may still be blocked in a launch when its run should end: it
  // is then killed, reports nothing, and counts as never served.
  const bool may_starve = service_class == "background";
  const int exit_code = svc->Wait(may_starve ? 10000 : 30000);
  if (!may_starve) {
    EXPECT_EQ(exit_code, 0) << svc->Stderr();
  }
  const Sample b = test->gpu().Take();
  const auto result = svc->Result();
  if (!may_starve) {
    EXPECT_FALSE(result.is_null()) << svc->Stdout();
  }
  f.p99_ms = result.is_null() ? 1e9 : result.value("p99_us", 1e9) / 1e3;
  f.requests = result.is_null() ? 0 : result.value("requests", 0);
  f.other_busy = BusyFraction(a, b, "trainer");
  std::printf("%s (%s): service p99 %.2f ms, %d requests; trainer busy %.3f\n", managed ? "gpuslice" : "unmanaged",
              service_class.c_str(), f.p99_ms, f.requests, f.other_busy);
  return f;
}

// The service alone on the GPU, in the same test: on a loaded host every wake-up of the service
// and of the simulated GPU's threads is late, alone as beside a trainer, so the bound is taken
// from what this host gives now. Measured (2-core build machine): alone p99 1.06 ms quiet; with
// two busy loops beside it 4.2-5.2 ms, and beside the trainer 3.7-8.9 ms under gpuslice, 4.9-11.0
// ms unmanaged. A constant bound failed two CI runs at 6.3-7.8 ms whose host was that loaded.
double ServiceAloneP99Ms(SchedRealTenantsTest* test, const std::vector<std::string>& service_args = kService) {
  Child* alone = test->gpu().StartReady("service-alone", service_args, WithClass(SchedTest::Managed(30), "latency"));
  EXPECT_NE(alone, nullptr);
  if (!alone) return 1e9;
  EXPECT_EQ(alone->Wait(30000), 0) << alone->Stderr();
  const auto result = alone->Result();
  const double p99_ms = result.is_null() ? 1e9 : result.value("p99_us", 1e9) / 1e3;
  std::printf("alone: service p99 %.2f ms\n", p99_ms);
  return p99_ms;
}

// p99 <= alone + the trainer's kernel (4 ms) + 2 ms, and never tighter than with the quiet
// machine's alone figure (1.1 ms: 7.1 ms). The target is + 1 ms (`gpuslice-bench latency-class`
// reports it); a test on a loaded host allows one more: clean-clone CI runs missed + 1 ms by
// 0.5-0.8 ms, while both controls miss + 2 ms by more than 3 ms. Measured beside the trainer
// (5 runs, quiet machine) 3.0-3.3 ms; background control: at most a few requests, p99 > 1 s.
constexpr double kQuietAloneP99Ms = 1.1;
constexpr double kTrainerKernelMs = 4.0;
constexpr double kHostSlackMs = 2.0;
double LatencyP99BoundMs(double alone_p99_ms) {
  return std::max(alone_p99_ms, kQuietAloneP99Ms) + kTrainerKernelMs + kHostSlackMs;
}

TEST_F(SchedRealTenantsTest, ALatencyClassServiceWaitsOnlyForTheTrainersRunningKernel) {
  const double bound_ms = LatencyP99BoundMs(ServiceAloneP99Ms(this));
  const ServiceFigures f = ServiceBesideTrainer(this, true, "latency");
  EXPECT_LE(f.p99_ms, bound_ms) << "load average: " << ReadLoadAverage();
  EXPECT_GE(f.requests, 380) << "every period served";
  EXPECT_GE(f.other_busy, 0.7) << "the trainer keeps the time the service leaves (unmanaged: 0.90)";
}

TEST_F(SchedRealTenantsTest, ControlTheSameServiceAsBackgroundWaitsForTheTrainer) {
  const double bound_ms = LatencyP99BoundMs(ServiceAloneP99Ms(this));
  EXPECT_GT(ServiceBesideTrainer(this, true, "background").p99_ms, bound_ms);
}

// --- a service that uses most of its request, beside a trainer that uses less of its own ---
// What the latency class adds over standard. A standard waiter is yielded to at once only while
// it is owed the GPU: behind the holder in virtual time (time used / request) by more than a
// quantum. A light service is (as standard, the service of the test above passes as well), but
// this one uses 27% of the device on a request of 30 — 0.9 of it — beside a trainer (request 70)
// that works in bursts of 16 ms every 40 ms, 0.4 of the device, 0.57 of its request: the
// service is ahead in virtual time, never owed, and as standard a request that comes during a
// burst waits for the trainer's quantum (10 ms) to end. Declared latency, its launches pass the
// grant while its priority bucket (filled at its request, drained by what it uses) holds time —
// always, at 0.9 of its request — and wait only for the trainer's running kernel. The control is
// the same service declared standard; the `latency-class-waits` sabotage of
// scripts/mutation-check.sh makes the latency class behave as standard, and fails this test.
const std::vector<std::string> kBusyService = {"latency", "--period-ms", "10",  "--kernels-per-request",
                                               "3",       "--kernel-us", "900", "--duration",
                                               "4"};
const std::vector<std::string> kBurstTrainer = {"latency", "--period-ms", "40",   "--kernels-per-request",
                                                "4",       "--kernel-us", "4000", "--duration",
                                                "60"};

// The service's p99 less its bound (alone + the trainer's kernel + 2 ms, as above), and how many
// of its 400 periods it served.
std::pair<double, int> BusyServiceBesideBurstTrainer(SchedRealTenantsTest* test, const std::string& service_class) {
  const double bound_ms = LatencyP99BoundMs(ServiceAloneP99Ms(test, kBusyService));
  const ServiceFigures f = ServiceBesideTrainer(test, true, service_class, kBusyService, kBurstTrainer);
  std::printf("%s: p99 %.2f ms against a bound of %.2f ms (load average %s)\n", service_class.c_str(), f.p99_ms,
              bound_ms, ReadLoadAverage().c_str());
  return {f.p99_ms - bound_ms, f.requests};
}

// Measured (quiet 2-core machine): latency p99 6.0-6.4 ms against a bound of 7.8 ms (+ 1 ms; now
// 8.8), every period served; standard 12.1-15.7 ms, a quarter of the periods skipped (a request
// still running when the next is due).
TEST_F(SchedRealTenantsTest, ALatencyClassServiceUsingMostOfItsRequestStillPassesTheGrant) {
  const auto [over_bound_ms, requests] = BusyServiceBesideBurstTrainer(this, "latency");
  EXPECT_LE(over_bound_ms, 0) << "load average: " << ReadLoadAverage();
  EXPECT_GE(requests, 380) << "every period served";
}

TEST_F(SchedRealTenantsTest, ControlTheSameServiceAsStandardIsNotOwedAndWaitsForTheQuantum) {
  EXPECT_GT(BusyServiceBesideBurstTrainer(this, "standard").first, 0);
}

// --- a background tenant ---
// A synchronous launcher (request 50) beside a batch job that keeps eight kernels queued: when
// the batch job is `background`, the launcher keeps nearly all of the GPU it would have alone
// (the batch job runs only in the gaps it leaves); the control, the same job as `standard` with
// the same request, takes its half.
const std::vector<std::string> kBatch = {"compute", "--kernel-us", "1000", "--depth", "8", "--duration", "60"};
const std::vector<std::string> kSyncService = {"compute", "--kernel-us", "1000", "--depth", "1", "--duration", "60"};

double ServiceShareBesideBatch(SchedRealTenantsTest* test, const std::string& batch_class) {
  EXPECT_NE(test->gpu().StartReady("batch", kBatch, WithClass(SchedTest::Managed(50), batch_class)), nullptr);
  EXPECT_NE(test->gpu().StartReady("service", kSyncService, SchedTest::Managed(50)), nullptr);
  SleepFor(0.5);
  const Sample a = test->gpu().Take();
  SleepFor(3);
  const Sample b = test->gpu().Take();
  const double service = BusyFraction(a, b, "service"), batch = BusyFraction(a, b, "batch");
  std::printf("batch %s: service busy %.3f, batch busy %.3f\n", batch_class.c_str(), service, batch);
  return service;
}

// Measured (5 runs): beside background 0.90-0.95 of the device; beside standard 0.48-0.50.
constexpr double kBesideBackgroundAtLeast = 0.75;

TEST_F(SchedRealTenantsTest, ABackgroundTenantRunsOnlyOnTimeTheOthersLeave) {
  EXPECT_GE(ServiceShareBesideBatch(this, "background"), kBesideBackgroundAtLeast);
}

TEST_F(SchedRealTenantsTest, ControlAStandardBatchJobTakesItsShare) {
  EXPECT_LT(ServiceShareBesideBatch(this, "standard"), kBesideBackgroundAtLeast);
}

// --- a latency tenant that is really compute-bound ---
// The latency class passes the grant only while its priority bucket (filled at its request)
// holds time; beyond that its launches wait for the grant like a standard tenant's. A tenant that
// declares `latency` with a small request (10) but keeps eight 1 ms kernels queued must therefore
// be held to about its request beside a standard trainer (90): were its launches to pass the
// grant whatever the bucket holds (the `latency-bucket-ignored` sabotage of
// scripts/mutation-check.sh), it would run beside the trainer all the time, time-sliced with it
// by the hardware, and take half of the device. Unmanaged — the control — it takes that half.
const std::vector<std::string> kGreedyLatency = {"compute", "--kernel-us", "1000", "--depth", "8", "--duration", "60"};

double GreedyLatencyShare(SchedRealTenantsTest* test, bool managed) {
  const StartOptions greedy = managed ? WithClass(SchedTest::Managed(10), "latency") : SchedTest::Unmanaged();
  const StartOptions trainer = managed ? SchedTest::Managed(90) : SchedTest::Unmanaged();
  EXPECT_NE(test->gpu().StartReady("trainer", kBatch, trainer), nullptr);
  EXPECT_NE(test->gpu().StartReady("greedy", kGreedyLatency, greedy), nullptr);
  SleepFor(1);  // past the bucket's first fill (10% of its 100 ms window)
  const Sample a = test->gpu().Take();
  SleepFor(3);
  const Sample b = test->gpu().Take();
  const double share = BusyFraction(a, b, "greedy"), trainer_share = BusyFraction(a, b, "trainer");
  std::printf("%s: latency tenant (request 10) busy %.3f, trainer (request 90) busy %.3f\n",
              managed ? "gpuslice" : "unmanaged", share, trainer_share);
  return share;
}

// Its request is 0.10; the hardware's even time-slicing gives it 0.5.
constexpr double kGreedyLatencyAtMost = 0.25;

TEST_F(SchedRealTenantsTest, AComputeBoundLatencyTenantIsHeldToItsRequestBesideStandardTenants) {
  EXPECT_LE(GreedyLatencyShare(this, true), kGreedyLatencyAtMost);
}

TEST_F(SchedRealTenantsTest, ControlWithoutGpusliceTheLatencyTenantTakesHalf) {
  EXPECT_GT(GreedyLatencyShare(this, false), kGreedyLatencyAtMost);
}

// --- a limited trainer beside a small limited job that waits over its limit ---
// A trainer (70%, limit 70) keeps two 2 ms kernels queued beside a small job (5%, limit 5) whose
// 1 ms kernels use up its bucket at once, after which it waits with its bucket empty. Behind
// the trainer in virtual time, the small job would be owed the GPU, but it cannot take the grant.
// When the trainer yielded to it all the same, the GPU went to nobody and the trainer's queued
// kernels ran on charged to no one: it took 93% against its limit of 70 (the
// `over-limit-yield-uncharged` sabotage of scripts/mutation-check.sh puts that back). Every
// tenant must stay within its limit; unmanaged — the control — the hardware gives the small job
// half the device.
const std::vector<std::string> kLimitedTrainer = {"compute", "--kernel-us", "2000", "--depth", "2", "--duration", "60"};
const std::vector<std::string> kSmallJob = {"compute", "--kernel-us", "1000", "--depth", "2", "--duration", "60"};

// How far each tenant is over its limit, the worst of the two (negative: both within).
double WorstOverLimit(SchedRealTenantsTest* test, bool managed) {
  EXPECT_NE(test->gpu().StartReady("trainer", kLimitedTrainer,
                                   managed ? SchedTest::Managed(70, 70) : SchedTest::Unmanaged()),
            nullptr);
  EXPECT_NE(test->gpu().StartReady("small", kSmallJob, managed ? SchedTest::Managed(5, 5) : SchedTest::Unmanaged()),
            nullptr);
  SleepFor(1);
  const Sample a = test->gpu().Take();
  SleepFor(4);
  const Sample b = test->gpu().Take();
  const double trainer = BusyFraction(a, b, "trainer"), small = BusyFraction(a, b, "small");
  std::printf("%s: trainer (limit 70) busy %.3f, small job (limit 5) busy %.3f\n", managed ? "gpuslice" : "unmanaged",
              trainer, small);
  return std::max(trainer - 0.70, small - 0.05);
}

// Measured (bench/scenarios/four-ways.yaml without its service, 15 s): trainer 0.69, small job
// 0.044; before the fix the trainer took 0.93. Unmanaged each takes about half.
constexpr double kOverLimitAtMost = 0.06;

TEST_F(SchedRealTenantsTest, ALimitedTrainerStaysWithinItsLimitBesideASmallJobWaitingOverItsOwn) {
  EXPECT_LE(WorstOverLimit(this, true), kOverLimitAtMost);
}

TEST_F(SchedRealTenantsTest, ControlWithoutGpusliceTheSmallJobTakesHalf) {
  EXPECT_GT(WorstOverLimit(this, false), kOverLimitAtMost);
}

// --- a service whose request is a chain of dependent kernels ---
// Each request of the service is sixteen 250 us kernels, each launched 300 us after the one before
// it has finished (a decode loop: launch, wait, sample the token on the host, launch), beside a
// trainer that keeps eight 2 ms kernels queued. Between two kernels of a request the service has
// nothing in flight; that is not idleness (its grace, learnt from its own gaps), so it keeps the
// grant for the whole request and waits for the trainer once, at the start. Were every gap
// idleness, each of the sixteen kernels would hand the GPU back to the trainer and wait for it
// again (the `idle-between-launches` sabotage of scripts/mutation-check.sh). Unmanaged — the
// control — each kernel is time-sliced with the trainer's by the hardware and the chain is as slow.
const std::vector<std::string> kChainService = {
    "latency", "--period-ms", "50", "--kernels-per-request", "16", "--dependent", "--host-gap-us", "300", "--kernel-us",
    "250",     "--duration",  "4"};
const std::vector<std::string> kQueueingTrainer = {"compute", "--kernel-us", "2000", "--depth",
                                                   "8",       "--duration",  "60"};

double ChainP50BesideTrainer(SchedRealTenantsTest* test, bool managed) {
  const StartOptions options = managed ? SchedTest::Managed(50) : SchedTest::Unmanaged();
  EXPECT_NE(test->gpu().StartReady("trainer", kQueueingTrainer, options), nullptr);
  Child* service = test->gpu().StartReady("service", kChainService, options);
  EXPECT_NE(service, nullptr);
  if (!service) return 1e9;
  EXPECT_EQ(service->Wait(30000), 0) << service->Stderr();
  const auto result = service->Result();
  EXPECT_FALSE(result.is_null()) << service->Stdout();
  const double p50_ms = result.is_null() ? 1e9 : result.value("p50_us", 1e9) / 1e3;
  std::printf("%s: chain p50 %.2f ms, p99 %.2f ms, %d requests\n", managed ? "gpuslice" : "unmanaged", p50_ms,
              result.is_null() ? 0 : result.value("p99_us", 0.0) / 1e3,
              result.is_null() ? 0 : result.value("requests", 0));
  return p50_ms;
}

// The median request (alone about 10 ms: 4 ms of kernels, 15 host gaps). Measured (load 2-3):
// gpuslice 13.9-14.0 ms (3 runs); unmanaged 36.6-37.3 ms (3); the `idle-between-launches`
// sabotage 38.4-38.9 ms (4). Without the host gap the sabotage cost less (10.3-16.6 ms against
// 5.6-6.0): a gap of microseconds is seldom seen by the decision that would hand the grant over.
// The bound lies midway between the managed and the unmanaged figures: one clean-clone CI run
// measured 23.9-31.4 ms in a slow stretch of its host (a stretched host gap outlasts the grace).
constexpr double kChainP50AtMostMs = 26;

TEST_F(SchedRealTenantsTest, AChainOfDependentKernelsKeepsTheGrantBetweenItsKernels) {
  EXPECT_LE(ChainP50BesideTrainer(this, true), kChainP50AtMostMs);
}

TEST_F(SchedRealTenantsTest, ControlWithoutGpusliceEachKernelOfTheChainWaitsForTheTrainer) {
  EXPECT_GT(ChainP50BesideTrainer(this, false), kChainP50AtMostMs);
}

// --- a holder that is stopped (SIGSTOP, docker pause, a debugger) ---
// Its monitor stops renewing its lease: after at most two quanta the grant moves on, and the
// other tenant runs alone while it stays stopped. The old scheduler let it keep the grant for
// as long as it was stopped (caught by the lease sabotage of scripts/mutation-check.sh).
TEST_F(SchedRealTenantsTest, AStoppedHolderLosesTheGrantAndTheOtherTenantRunsAlone) {
  Child* frozen = Start("frozen", kComputeBound, Managed(50));
  Child* other = Start("other", kComputeBound, Managed(50));
  ASSERT_TRUE(frozen && other);
  SleepFor(0.5);
  ASSERT_TRUE(Eventually([&] { return gpu().Take().running_pid == frozen->pid(); }, std::chrono::seconds(5)));
  frozen->Kill(SIGSTOP);
  SleepFor(0.1);  // two quanta of lease (20 ms), its queued kernels, and the hand-over
  const auto [a, b] = Measure(1.5);
  frozen->Kill(SIGCONT);
  EXPECT_GE(BusyFraction(a, b, "other"), 0.85) << "the other tenant has the GPU while the holder is stopped";
  SleepFor(0.5);
  const auto [c, d] = Measure(2);
  EXPECT_GE(BusyFraction(c, d, "frozen"), 0.25) << "once continued, the stopped tenant takes turns again";
}

// --- waiters that die ---
// Twenty processes of a tenant wait for the grant and are SIGKILLed; an idle process of the same
// tenant lives on. Waiting is counted per process: the dead stop counting at once, and the other
// tenant, alone, has the whole GPU (the old scheduler kept the tenant "waiting" for good and
// split the GPU with nobody).
TEST_F(SchedRealTenantsTest, WaitersThatDieStopCountingAtOnce) {
  ASSERT_NE(Start("alone", kComputeBound, Managed(50)), nullptr);
  ASSERT_NE(gpu().StartReady("crowd", {"memory", "--chunk", "1Mi", "--hold", "60"}, Managed(50)), nullptr);
  std::vector<Child*> waiters;
  for (int i = 0; i < 20; ++i) {
    Child* waiter = Start("crowd", kComputeBound, Managed(50));
    ASSERT_NE(waiter, nullptr);
    waiters.push_back(waiter);
  }
  SleepFor(0.5);
  for (Child* waiter : waiters) waiter->Kill(SIGKILL);
  for (Child* waiter : waiters) waiter->Wait(5000);
  SleepFor(0.3);
  const auto [a, b] = Measure(2);
  EXPECT_GE(BusyFraction(a, b, "alone"), 0.85) << "alone on the GPU once the crowd died";
}

}  // namespace
}  // namespace gpuslice::testing
