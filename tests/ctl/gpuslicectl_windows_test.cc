// The windows gpuslicectl's figures are measured over, with real tenants under the preloaded shim
// over the simulated GPU: HELD is "-" until a first window of taking turns (10 s or more) has
// completed, whatever the tenants' classes; the device's busy figure is its last sample period's. A latency tenant is
// served before the GPU's first grant (its launches go first), and the first window's start recorded that service: the
// snapshot took it for a completed window: status showed HELD 0.0% three seconds in, and the
// exporter a share ratio of 0 where its HELP says the series is absent.
#include <signal.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cctype>
#include <chrono>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "broker/snapshot.h"
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
  auto service =
      StartShimmed({BinDir() + "/gpuslice-workload", "latency", "--period-ms", "5", "--kernel-us", "500", "--duration",
                    "30", "--ready-line"},
                   {"GPUSLICE_TENANT=search", "GPUSLICE_COMPUTE_REQUEST=30", "GPUSLICE_COMPUTE_CLASS=latency"});
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

// "N% busy" is over NVML's last sample period, as on a real GPU, whoever asks: status (a fresh
// process) once got the average since the simulated GPU was created, 37% busy on an idle GPU and
// 22-53% beside two saturating tenants. Status, top and the exporter read the same figure.
TEST_F(GpuslicectlWindowsTest, BusyIsTheLastSamplePeriodsNotTheAverageSinceTheGpuWasCreated) {
  auto busy_in = [](const std::string& out) {
    const std::string marker = "% busy in NVML's last sample period (1/6 s to 1 s)";
    const size_t at = out.find(marker);
    if (at == std::string::npos) return -1;
    size_t start = at;
    while (start > 0 && std::isdigit(static_cast<unsigned char>(out[start - 1]))) --start;
    return std::stoi(out.substr(start, at - start));
  };
  // Idle first (the simulated GPU exists from the first process on), then a trainer saturating it.
  auto idle =
      StartShimmed({BinDir() + "/gpuslice-workload", "memory", "--chunk", "1Mi", "--hold", "60", "--ready-line"},
                   {"GPUSLICE_TENANT=idle"});
  ASSERT_TRUE(idle->WaitForOutput("\"event\":\"holding\"")) << idle->StderrSoFar();
  std::this_thread::sleep_for(std::chrono::seconds(3));
  auto trainer = StartShimmed({BinDir() + "/gpuslice-workload", "compute", "--kernel-us", "2000", "--depth", "4",
                               "--duration", "60", "--ready-line"},
                              {"GPUSLICE_TENANT=trainer"});
  ASSERT_TRUE(trainer->WaitForOutput("\"event\":\"ready\"")) << trainer->StderrSoFar();
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  ProcessResult r = Status();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_GE(busy_in(r.out), 85) << "a saturated GPU, 2.5 s after 3 s idle:\n" << r.out;
  // top --once shows the same figure in its GPU's header.
  const ProcessResult top =
      gpuslice::testing::Run({BinDir() + "/gpuslicectl", "top", "--once", "--state-dir", state_dir()},
                             {"LD_LIBRARY_PATH=" + SimLibDir()});
  const size_t at = top.out.find("busy ");
  ASSERT_NE(at, std::string::npos) << top.out;
  EXPECT_GE(std::stoi(top.out.substr(at + 5)), 85) << top.out;
  // Idle again: the last period is idle, whatever the GPU did before.
  trainer->Kill(SIGTERM);
  trainer->Wait(30000);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  r = Status();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(busy_in(r.out), 0) << "an idle GPU after 2.5 s of work:\n" << r.out;
  Stop(*idle);
}

}  // namespace
}  // namespace gpuslice::testing
