// The windows gpuslicectl's figures are measured over, with real tenants under the preloaded shim
// over the simulated GPU: HELD is "-" until a first window of taking turns (10 s or more) has
// completed, whatever the tenants' classes. A latency tenant is served before the GPU's first
// grant (its launches go first), and the first window's start recorded that service: the
// snapshot took it for a completed window: status showed HELD 0.0% three seconds in, and the
// exporter a share ratio of 0 where its HELP says the series is absent.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "broker/broker.h"
#include "tests/support/shim_fixture.h"

namespace gpuslice::testing {
namespace {

using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::Not;
using Clock = std::chrono::steady_clock;

class GpuslicectlWindowsTest : public ShimTest {
 protected:
  ProcessResult Status(const std::vector<std::string>& extra = {}) {
    std::vector<std::string> argv = {BinDir() + "/gpuslicectl", "status", "--state-dir", state_dir()};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return gpuslice::testing::Run(argv, {"LD_LIBRARY_PATH=" + SimLibDir()});
  }
};

TEST_F(GpuslicectlWindowsTest, ALatencyTenantHasNoShareBeforeTheFirstWindowCompletes) {
  const auto start = Clock::now();
  auto service = StartShimmed({BinDir() + "/gpuslice-workload", "latency", "--period-ms", "5", "--kernel-us", "500",
                               "--duration", "30", "--ready-line"},
                              {"GPUSLICE_TENANT=search", "GPUSLICE_COMPUTE_REQUEST=30",
                               "GPUSLICE_COMPUTE_CLASS=latency"});
  ASSERT_TRUE(service->WaitForOutput("\"event\":\"ready\"")) << service->StderrSoFar();
  // The service alone first: served without a grant, before the GPU's first one.
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  auto trainer = StartShimmed({BinDir() + "/gpuslice-workload", "compute", "--kernel-us", "2000", "--duration", "30",
                               "--ready-line"},
                              {"GPUSLICE_TENANT=trainer", "GPUSLICE_COMPUTE_REQUEST=70"});
  ASSERT_TRUE(trainer->WaitForOutput("\"event\":\"ready\"")) << trainer->StderrSoFar();
  // Both have taken turns for a while: the GPU has had grants, and both tenants were served.
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  const ProcessResult r = Status();
  const ProcessResult j = Status({"--json"});
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  ASSERT_LT(elapsed, 9.5) << "too slow a machine: a first window may have completed";
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, ContainsRegex("\n  search +[^\n]* latency +-\n")) << r.out;
  EXPECT_THAT(r.out, ContainsRegex("\n  trainer +[^\n]* standard +-\n")) << r.out;
  EXPECT_THAT(r.out, HasSubstr("\n  HELD: - until a first window of taking turns (10 s or more) completes\n"));
  EXPECT_THAT(r.out, Not(HasSubstr("which ended"))) << r.out;
  ASSERT_EQ(j.exit_code, 0) << j.err;
  const auto gpu = nlohmann::json::parse(j.out)["gpus"][0];
  EXPECT_TRUE(gpu["share_window_ended_seconds_ago"].is_null()) << gpu.dump();
  for (const auto& tenant : gpu["tenants"]) {
    EXPECT_TRUE(tenant["last_window_share_percent"].is_null()) << tenant.dump();
  }
  // The exporter's view (its share_ratio series are drawn only for a completed window).
  const Result<broker::Snapshot> exporters = broker::TakeReadOnlySnapshot(state_dir());
  ASSERT_TRUE(exporters.ok()) << exporters.message();
  ASSERT_EQ(exporters->gpus.size(), 1u);
  EXPECT_FALSE(exporters->gpus[0].share_window_complete);
  // The control: the tenants were really served (a share would have had something to show).
  uint64_t served = 0;
  for (const auto& g : BrokerSnapshot().gpus)
    for (const auto& tenant : g.tenants)
      if (tenant.name == "search") served = tenant.service_ns;
  EXPECT_GT(served, 0u) << "the latency tenant was never served: the case is not the one to test";
}

}  // namespace
}  // namespace gpuslice::testing
