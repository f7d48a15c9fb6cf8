// The compute gate's threads at work, without timing bounds: two preloaded tenants share the
// simulated GPU, so the shim tracks every launch with an event, its monitor thread polls them
// and renews the grant while the application's thread launches, waits and is gated, and the
// grant changes hands hundreds of times. Checked: every kernel launched is completed and
// counted, both processes exit cleanly, and at exit no grant, waiter or charge is left behind.
//
// This is the test the ThreadSanitizer pass (.ci/run) runs for the launch path: there the
// monitor thread and the launching thread touch the same tracker and grant state, and any race
// between them is reported (the process then exits 66 and the exit-code checks fail). The
// scheduler's figures are the sched_* tests' subject; they need a quiet, uninstrumented build.
#include <signal.h>

#include <gtest/gtest.h>

#include <string>

#include "broker/snapshot.h"
#include "tests/support/shim_fixture.h"

namespace gpuslice::testing {
namespace {

class ShimComputeThreadsTest : public ShimTest {};

// After two tenants shared the GPU and exited: the grant changed hands, and no grant, waiter or
// charge is left behind; each was charged device time.
void ExpectTheSharedGpuLeftClean(const broker::Snapshot& snapshot) {
  ASSERT_EQ(snapshot.gpus.size(), 1u);
  const broker::GpuView& gpu = snapshot.gpus[0];
  EXPECT_EQ(gpu.holder, "") << "a tenant that exited still holds the GPU";
  EXPECT_EQ(gpu.waiting, 0u);
  EXPECT_GT(gpu.grants, 2u) << "the grant never changed hands: the two tenants did not share the GPU";
  for (const auto& tenant : gpu.tenants) {
    EXPECT_EQ(tenant.used, 0u) << tenant.name;
    EXPECT_GT(tenant.service_ns, 0u) << tenant.name << " was never charged device time";
  }
}

TEST_F(ShimComputeThreadsTest, ALimitedTrainerAndAServiceFinishEveryKernelAndLeaveNoGrant) {
  constexpr int kTrainerKernels = 3000;
  constexpr int kRequests = 150;
  auto trainer = StartShimmed({App("workload"), "compute", "--kernel-us", "300", "--depth", "4", "--kernels",
                               std::to_string(kTrainerKernels)},
                              {"GPUSLICE_TENANT=trainer", "GPUSLICE_COMPUTE_LIMIT=60"});
  auto service = StartShimmed({App("workload"), "latency", "--period-ms", "4", "--kernels-per-request", "2",
                               "--kernel-us", "200", "--requests", std::to_string(kRequests)},
                              {"GPUSLICE_TENANT=service", "GPUSLICE_COMPUTE_REQUEST=40"});
  const ProcessResult t = trainer->Wait(180000);
  const ProcessResult s = service->Wait(180000);
  ASSERT_EQ(t.exit_code, 0) << Describe(t);
  ASSERT_EQ(s.exit_code, 0) << Describe(s);
  EXPECT_EQ(ResultOf(t).value("kernels", -1), kTrainerKernels) << t.out;
  EXPECT_EQ(ResultOf(s).value("requests", -1), kRequests) << s.out;

  ExpectTheSharedGpuLeftClean(BrokerSnapshot());
}

// A trainer that launches from more threads than have launch lanes of their own (256; the rest
// share one, under its mutex) beside a service: every thread's launches are tracked and counted
// down by the monitor while the grant changes hands. Checked as above: nothing is lost or left.
TEST_F(ShimComputeThreadsTest, ATrainerLaunchingFromThreeHundredThreadsFinishesEveryKernelBesideAService) {
  constexpr int kThreads = 300;
  constexpr int kKernelsPerThread = 6;
  constexpr int kRequests = 100;
  auto trainer = StartShimmed({App("workload"), "compute", "--kernel-us", "200", "--depth", "2", "--threads",
                               std::to_string(kThreads), "--kernels", std::to_string(kKernelsPerThread)},
                              {"GPUSLICE_TENANT=trainer"});
  auto service = StartShimmed({App("workload"), "latency", "--period-ms", "4", "--kernels-per-request", "2",
                               "--kernel-us", "200", "--requests", std::to_string(kRequests)},
                              {"GPUSLICE_TENANT=service", "GPUSLICE_COMPUTE_REQUEST=40"});
  const ProcessResult t = trainer->Wait(180000);
  const ProcessResult s = service->Wait(180000);
  ASSERT_EQ(t.exit_code, 0) << Describe(t);
  ASSERT_EQ(s.exit_code, 0) << Describe(s);
  EXPECT_EQ(ResultOf(t).value("kernels", -1), kThreads * kKernelsPerThread) << t.out;
  EXPECT_EQ(ResultOf(s).value("requests", -1), kRequests) << s.out;

  ExpectTheSharedGpuLeftClean(BrokerSnapshot());
}

// A holder SIGKILLed with nobody else on the GPU cannot hand the grant on, and nobody is left to
// decide: the broker's view (gpuslicectl status) must not name a tenant that is gone as the
// holder. The control is the same view a moment before the kill, which names it.
TEST_F(ShimComputeThreadsTest, AHolderKilledAloneIsNotShownAsTheHolder) {
  auto trainer = StartShimmed({App("workload"), "compute", "--kernel-us", "1000", "--depth", "2", "--duration", "60",
                               "--ready-line"},
                              {"GPUSLICE_TENANT=trainer"});
  ASSERT_TRUE(trainer->WaitForOutput("\"ready\"")) << trainer->StderrSoFar();
  ASSERT_TRUE(Eventually(
      [&] {
        const auto snapshot = BrokerSnapshot();
        return snapshot.gpus.size() == 1 && snapshot.gpus[0].holder == "trainer";
      },
      std::chrono::seconds(10)))
      << "the lone tenant was never shown holding the GPU";
  trainer->Kill(SIGKILL);
  trainer->Wait(10000);
  const broker::Snapshot snapshot = BrokerSnapshot();
  ASSERT_EQ(snapshot.gpus.size(), 1u);
  EXPECT_EQ(snapshot.gpus[0].holder, "") << "a killed tenant is still shown holding the GPU";
}

}  // namespace
}  // namespace gpuslice::testing
