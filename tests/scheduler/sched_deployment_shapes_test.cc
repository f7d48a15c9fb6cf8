// The compute scheduler in the shapes real deployments take and the benchmark's tenants do not:
// a tenant that leaves (exit() from main, or SIGKILL) while one of its threads waits for the
// grant and the holder drains long kernels; a process that works on two GPUs beside one tenant
// per GPU. Each was a freeze or a wrong gate on the landed code (issue 22); the tests check what
// a user would notice — the survivor keeps the GPU and stops on SIGTERM, each neighbour gets its
// share on its own GPU — against the simulator's ground truth.
#include <signal.h>

#include <chrono>

#include "gpuslice/sim_query.h"
#include "tests/support/subprocess.h"
#include "tests/support/test_env.h"

#include "broker/snapshot.h"
#include "tests/support/sched_fixture.h"

namespace gpuslice::testing {
namespace {

using SchedDeploymentShapesTest = SchedTest;
using Clock = std::chrono::steady_clock;

// The holder's kernels are 50 ms: five quanta of drain after every quantum it is asked to end, so
// a leaver is most likely to go during that drain, which left the gate closed on the landed code.
constexpr double kLongKernelS = 0.050;
const std::vector<std::string> kLongKernels = {"compute", "--kernel-us",       "50000", "--depth", "2", "--duration",
                                               "120",     "--report-interval", "0.25"};

// Rounds of a second tenant that waits for the grant (1 ms kernels, two queued) and leaves
// `after_s` into its run, at staggered moments so that some leave in the holder's drain.
constexpr double kLeaveAfterS[] = {0.35, 0.5, 0.65, 0.8, 0.95, 0.42, 0.57, 0.72};

// After each leaver: the survivor, alone again, runs at full speed — by its own count of 50 ms
// kernels completed between two of its progress lines 0.6 s apart (a stalled survivor prints no
// new line). On the landed code the gate stayed closed for the leaver that was gone: the
// survivor completed nothing until, by chance, its blocked thread was seen idle (stalls of
// 1.5 s measured), or for ever.
void ExpectSurvivorAloneAtFullSpeed(Child* survivor, int round) {
  SleepFor(0.3);
  const Json before = LastProgress(*survivor);
  SleepFor(0.6);
  const Json after = LastProgress(*survivor);
  const double seconds = after.value("elapsed_s", 0.0) - before.value("elapsed_s", 0.0);
  const double kernels = after.value("kernels", 0.0) - before.value("kernels", 0.0);
  const double busy = seconds > 0.3 ? kernels * kLongKernelS / seconds : 0;
  EXPECT_GE(busy, 0.8) << "round " << round << ": the survivor has the GPU once the other left; " << kernels
                       << " kernels in " << seconds << " s between its progress lines";
}

// At the end it ends on SIGTERM within 2 s with its result. Frozen, it ignores SIGTERM (its
// launch never returns).
void ExpectSurvivorStopsOnSigterm(Child* survivor) {
  survivor->Kill(SIGTERM);
  const auto start = Clock::now();
  const int code = survivor->Wait(2000);
  EXPECT_EQ(code, 0) << "the survivor ends on SIGTERM within 2 s; it took "
                     << std::chrono::duration<double>(Clock::now() - start).count() << " s\n"
                     << survivor->Stderr();
  EXPECT_FALSE(survivor->Result().is_null()) << survivor->Stdout();
}

TEST_F(SchedDeploymentShapesTest, ATenantThatExitsNormallyWhileItsThreadWaitsFreezesNobody) {
  Child* survivor = Start("survivor", kLongKernels, Managed(50));
  ASSERT_NE(survivor, nullptr);
  int round = 0;
  for (const double after : kLeaveAfterS) {
    std::vector<std::string> args = {"compute",      "--kernel-us",        "1000", "--depth", "2", "--duration", "60",
                                     "--exit-after", std::to_string(after)};
    Child* leaver = Start("leaver", args, Managed(50));
    ASSERT_NE(leaver, nullptr);
    // It exits by itself; a crash of its launching thread inside the exit is not the point here.
    leaver->Wait(10000);
    EXPECT_NE(leaver->Stdout().find("\"event\":\"exiting\""), std::string::npos) << leaver->Stderr();
    ExpectSurvivorAloneAtFullSpeed(survivor, ++round);
  }
  ExpectSurvivorStopsOnSigterm(survivor);
}

TEST_F(SchedDeploymentShapesTest, ATenantKilledWhileItsThreadWaitsFreezesNobody) {
  Child* survivor = Start("survivor", kLongKernels, Managed(50));
  ASSERT_NE(survivor, nullptr);
  int round = 0;
  for (const double after : kLeaveAfterS) {
    Child* leaver = Start("leaver", kComputeBound, Managed(50));
    ASSERT_NE(leaver, nullptr);
    SleepFor(after);
    leaver->Kill(SIGKILL);
    leaver->Wait(10000);
    ExpectSurvivorAloneAtFullSpeed(survivor, ++round);
  }
  ExpectSurvivorStopsOnSigterm(survivor);
}

// The simulator's ground truth after such exits. A leaver's launching thread, let through the
// gate once its process left, launched into the simulated device after the process had
// unregistered from it; that request for a turn was never withdrawn, and the survivor then gave
// the device to the dead slot at every timeslice and waited out a liveness timeout each time: the
// simulator counted 0.28 of the device busy (3 runs) while the survivor ran at full speed.
TEST_F(SchedDeploymentShapesTest, TheSimulatorCountsTheSurvivorsTimeAfterLeaversExitedMidLaunch) {
  Child* survivor = Start("survivor", kLongKernels, Managed(50));
  ASSERT_NE(survivor, nullptr);
  for (const double after : kLeaveAfterS) {
    Child* leaver = Start("leaver",
                          {"compute", "--kernel-us", "1000", "--depth", "2", "--duration", "60", "--exit-after",
                           std::to_string(after)},
                          Managed(50));
    ASSERT_NE(leaver, nullptr);
    leaver->Wait(10000);
  }
  SleepFor(0.3);
  const auto [a, b] = Measure(1);
  EXPECT_GE(BusyFraction(a, b, "survivor"), 0.9) << "alone on the simulated device";
}

// --- what tenants are charged, against the device's busy time ---
// A latency-class service (30%: three 300 us kernels every 10 ms) beside a trainer that keeps 4 ms
// kernels queued: the service's launches run beside the trainer's grant. Each is charged for its
// own time and the trainer's grant leaves the service's out, so the charges of all tenants add up
// to at most the time the simulated device was busy (both were charged for the same time: 106%).
uint64_t ChargedNs(const std::string& state_dir) {
  std::string error;
  Result<broker::Snapshot> taken = broker::TakeSnapshot(state_dir);
  EXPECT_TRUE(taken.ok()) << taken.message();
  broker::Snapshot snap = taken.ok() ? std::move(taken).value() : broker::Snapshot();
  uint64_t sum = 0;
  for (const auto& gpu : snap.gpus)
    for (const auto& tenant : gpu.tenants) sum += tenant.service_ns;
  return sum;
}

TEST_F(SchedDeploymentShapesTest, ChargesWithALatencyTenantAddUpToNoMoreThanTheDevicesBusyTime) {
  StartOptions service = Managed(30);
  service.env.push_back("GPUSLICE_COMPUTE_CLASS=latency");
  Child* trainer = Start("trainer", {"compute", "--kernel-us", "4000", "--depth", "8", "--duration", "4"}, Managed(70));
  Child* svc =
      Start("service",
            {"latency", "--period-ms", "10", "--kernels-per-request", "3", "--kernel-us", "300", "--duration", "3.5"},
            service);
  ASSERT_TRUE(trainer && svc);
  // A grant is charged when it ends: the whole run, to the last process's exit, is compared.
  EXPECT_EQ(svc->Wait(30000), 0) << svc->Stderr();
  EXPECT_EQ(trainer->Wait(30000), 0) << trainer->Stderr();
  const double busy = static_cast<double>(gpu().Take().device_busy_ns);
  const double charged = static_cast<double>(ChargedNs(state_dir()));
  std::printf("charged %.3f s against %.3f s busy (%.1f%%)\n", charged / 1e9, busy / 1e9, 100 * charged / busy);
  // Within 3%: a completion is seen when the process next polls its events (within a monitor
  // step, 200 us), so each busy period is charged up to that much past the kernel's end; the
  // service's three sync kernels a request are a few hundred such periods a second (measured
  // 100.4-100.8% on a quiet host, 102.7% once in a clean-clone CI run; the double charge this
  // test catches, 106%).
  EXPECT_LE(charged, busy * 1.03) << "charged shares add up to at most the busy time";
  EXPECT_GE(charged, busy * 0.90) << "and account for nearly all of it";
}

// --- one process on two GPUs ---
// "both" launches one kernel on GPU 0 (a probe, as programs do before choosing their device) and
// then works on GPU 1; a neighbour works on each GPU. "both" is limited to 30% of each GPU it
// uses. Gated per GPU, the GPU-0 neighbour has GPU 0 to itself and "both" stays within its 30% on
// GPU 1. On the landed code "both" was gated on GPU 0 only: it kept taking GPU 0's grants
// (the neighbour lost up to its 30%) and ran unlimited on GPU 1 (half of it, as the hardware
// time-slices two busy processes) — which the unmanaged control shows.
struct TwoGpuFigures {
  double neighbour0 = 0, neighbour1 = 0, both_on_1 = 0;
};

TwoGpuFigures TwoGpus(SchedDeploymentShapesTest* test, bool managed) {
  const auto with = [&](StartOptions options) {
    options.env.push_back("GPUSLICE_SIM_DEVICES=2");
    return options;
  };
  const StartOptions neighbour = with(managed ? SchedTest::Managed(70) : SchedTest::Unmanaged());
  const StartOptions both = with(managed ? SchedTest::Managed(30, 30) : SchedTest::Unmanaged());
  std::vector<std::string> on0 = kComputeBound, on1 = kComputeBound, both_args = kComputeBound;
  on1.insert(on1.end(), {"--device", "1"});
  both_args.insert(both_args.end(), {"--device", "1", "--first-on-device", "0"});
  TwoGpuFigures f;
  if (!test->gpu().StartReady("neighbour0", on0, neighbour) || !test->gpu().StartReady("neighbour1", on1, neighbour) ||
      !test->gpu().StartReady("both", both_args, both)) {
    ADD_FAILURE() << "a tenant did not start";
    return f;
  }
  SleepFor(0.5);
  const Sample a0 = test->gpu().Take(0), a1 = test->gpu().Take(1);
  SleepFor(2.5);
  const Sample b0 = test->gpu().Take(0), b1 = test->gpu().Take(1);
  f.neighbour0 = BusyFraction(a0, b0, "neighbour0");
  f.neighbour1 = BusyFraction(a1, b1, "neighbour1");
  f.both_on_1 = BusyFraction(a1, b1, "both");
  std::printf("%s: GPU 0 neighbour %.3f; GPU 1 neighbour %.3f, two-GPU process %.3f\n",
              managed ? "gpuslice" : "unmanaged", f.neighbour0, f.neighbour1, f.both_on_1);
  return f;
}

// Measured (one run each, idle machine): GPU 0 neighbour 0.991, two-GPU process on GPU 1 0.295,
// GPU 1 neighbour 0.685; unmanaged: the two-GPU process 0.497 of GPU 1; the landed code: GPU 0
// neighbour 0.691 (the two-GPU process held GPU 0's grant for its GPU-1 launches), the two-GPU
// process 0.107 of GPU 1 (launching there only while it held GPU 0).
constexpr double kBothOnGpu1AtMost = 0.40;

TEST_F(SchedDeploymentShapesTest, AProcessOnTwoGpusIsGatedOnEachAndItsNeighboursGetTheirShares) {
  const TwoGpuFigures f = TwoGpus(this, true);
  EXPECT_GE(f.neighbour0, 0.85) << "GPU 0's neighbour is alone there after the probe";
  EXPECT_LE(f.both_on_1, kBothOnGpu1AtMost) << "the two-GPU process is held to its 30% limit on GPU 1";
  EXPECT_GE(f.neighbour1, 0.55) << "GPU 1's neighbour keeps the rest";
}

TEST_F(SchedDeploymentShapesTest, ControlWithoutGpusliceTheTwoGpuProcessTakesHalfOfGpu1) {
  EXPECT_GT(TwoGpus(this, false).both_on_1, kBothOnGpu1AtMost);
}

// --- a process stopped inside a grant decision ---
// A process holding the GPU's scheduler lock and never letting it go (stopped by SIGSTOP or a
// debugger mid-decision; the test client takes the lock and holds it). No grant can move. On the
// landed code every lock wait was unbounded: the waiting tenant and every newcomer hung for as
// long as the lock was held. Now a lock held past its bound (1 s) is not waited for: launches go
// ungated (the hardware's own sharing) and the process says so once.
TEST_F(SchedDeploymentShapesTest, AProcessStoppedInsideAGrantDecisionFreezesNobody) {
  Child* a = Start("a", kComputeBound, Managed(50));
  Child* b = Start("b", kComputeBound, Managed(50));
  ASSERT_TRUE(a && b);
  simquery::Snapshot snap;
  std::string error;
  ASSERT_TRUE(simquery::TakeSnapshot(state_path(), &snap, &error) && !snap.devices.empty()) << error;
  Subprocess stuck({BinDir() + "/gpuslice-broker-test-client", "--state", state_dir(), "--tenant", "stuck", "--uuid",
                    snap.devices[0].uuid, "--total", std::to_string(snap.devices[0].total_memory),
                    "--hold-sched-lock"});
  ASSERT_TRUE(stuck.WaitForOutput("ready", 10000)) << stuck.StderrSoFar();
  SleepFor(1.5);  // the lock's bound, then the waiter's launches go ungated
  const auto [s0, s1] = Measure(2);
  EXPECT_GE(BusyFraction(s0, s1, "a"), 0.2) << "a runs while the decision's lock is held";
  EXPECT_GE(BusyFraction(s0, s1, "b"), 0.2) << "b runs while the decision's lock is held";
  Child* newcomer = gpu().StartReady("newcomer", kComputeBound, Managed(50), 10000);
  ASSERT_NE(newcomer, nullptr) << "a newcomer starts";
  const auto [n0, n1] = Measure(2);
  EXPECT_GE(BusyFraction(n0, n1, "newcomer"), 0.1) << "and runs";
  const std::string said = a->Stderr() + b->Stderr() + newcomer->Stderr();
  EXPECT_NE(said.find("the scheduler lock of GPU entry 0"), std::string::npos) << said;
}

}  // namespace
}  // namespace gpuslice::testing
