// gpuslice-exporter scraped by a real Prometheus server (Debian's `prometheus`, every second):
// tenants run over the simulated GPU through the LD_PRELOADed shim, and the series Prometheus
// stored are checked against the simulator's ground truth and the broker: memory used exactly,
// refused allocations exactly, each tenant's share of the device time within 3 points.
// `promtool check metrics` lints the exposition. Skipped, with the reason, only when the
// prometheus binary is absent (scripts/install-deps.sh installs it; CI has it).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <string>

#include "gpuslice/sim_query.h"
#include "tests/support/exporter_fixture.h"
#include "tests/support/sched_fixture.h"

namespace gpuslice::testing {
namespace {

constexpr uint64_t kMiB = 1ULL << 20;

class ExporterPrometheusTest : public SchedTest {
 protected:
  // Polls until `check` holds or `seconds` pass (the scrapes come once a second).
  template <typename Check>
  bool Within(double seconds, Check check) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < deadline) {
      if (check()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return check();
  }
};

TEST_F(ExporterPrometheusTest, SeriesMatchTheSimulatorAndTheBroker) {
  if (Prometheus::Binary().empty()) GTEST_SKIP() << "prometheus is not installed (scripts/install-deps.sh installs it)";
  const std::string promtool = FindProgram("promtool");
  ASSERT_FALSE(promtool.empty()) << "promtool missing beside prometheus";

  // The exporter starts before any tenant: no state file yet.
  Exporter exporter(state_dir(), state_path());
  ASSERT_TRUE(exporter.WaitServing()) << exporter.process().StderrSoFar();
  Prometheus prometheus(exporter.port());
  ASSERT_TRUE(Within(20, [&] { return prometheus.Value("gpuslice_segment_up").has_value(); }))
      << "Prometheus never scraped the exporter:\n" << prometheus.Log();
  EXPECT_EQ(prometheus.Value("gpuslice_segment_up"), 0.0) << "no state file exists yet";

  // A memory tenant: quota 100 MiB, five 48 MiB allocations: two granted, three refused.
  StartOptions memory;
  memory.env = {"GPUSLICE_MEMORY_LIMIT=100Mi"};
  Child* holder = gpu().StartReady("mem", {"memory", "--chunk", "48Mi", "--count", "5", "--hold", "60"}, memory);
  ASSERT_NE(holder, nullptr);
  ASSERT_TRUE(holder->WaitForOutput("\"event\":\"holding\"")) << holder->Stderr();
  // Two compute-bound tenants asking for 75% and 25%.
  const Sample before = gpu().Take();
  Child* a = gpu().StartReady("a", kComputeBound, Managed(75));
  Child* b = gpu().StartReady("b", kComputeBound, Managed(25));
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  SleepFor(8);
  a->Kill(SIGTERM);
  b->Kill(SIGTERM);
  EXPECT_EQ(a->Wait(), 0);
  EXPECT_EQ(b->Wait(), 0);
  const Sample after = gpu().Take();

  // Ground truth: the simulator's bytes held by the memory tenant's process, its refusals as the
  // workload counted them, and each compute tenant's device time.
  simquery::Snapshot sim;
  std::string error;
  ASSERT_TRUE(simquery::TakeSnapshot(state_path(), &sim, &error)) << error;
  ASSERT_EQ(sim.devices.size(), 1u);
  const std::string uuid = sim.devices[0].uuid;
  uint64_t sim_memory = 0;
  for (const auto& p : sim.devices[0].processes)
    if (p.pid == holder->pid()) sim_memory = p.memory_used;
  ASSERT_EQ(sim_memory, 96 * kMiB);
  const auto busy = fairness::BusyBetween(before, after);
  const double truth_a = static_cast<double>(busy.at("a")) / static_cast<double>(busy.at("a") + busy.at("b"));

  // Prometheus's view, once a scrape after the compute tenants ended is stored.
  const std::map<std::string, std::string> mem_labels = {{"gpu", uuid}, {"tenant", "mem"}};
  ASSERT_TRUE(Within(10, [&] {
    const auto segment = prometheus.Value("gpuslice_segment_up");
    const auto waiting = prometheus.Value("gpuslice_gpu_waiting_processes", {{"gpu", uuid}});
    const auto processes_a = prometheus.Value("gpuslice_tenant_processes", {{"gpu", uuid}, {"tenant", "a"}});
    return segment == 1.0 && waiting == 0.0 && processes_a == 0.0;
  })) << "the exporter's series never showed the compute tenants gone";
  SleepFor(1.5);  // one more scrape: the last service figures
  EXPECT_EQ(prometheus.Value("gpuslice_tenant_memory_used_bytes", mem_labels), static_cast<double>(sim_memory));
  EXPECT_EQ(prometheus.Value("gpuslice_tenant_memory_quota_bytes", mem_labels), static_cast<double>(100 * kMiB));
  EXPECT_EQ(prometheus.Value("gpuslice_tenant_refused_allocations_total", mem_labels), 3.0);
  EXPECT_EQ(prometheus.Value("gpuslice_tenant_refused_bytes_total", mem_labels), 3.0 * 48 * kMiB);
  EXPECT_EQ(prometheus.Value("gpuslice_device_memory_used_bytes", {{"gpu", uuid}}),
            static_cast<double>(sim.devices[0].used_memory));
  const auto service_a = prometheus.Value("gpuslice_tenant_compute_service_seconds_total", {{"gpu", uuid}, {"tenant", "a"}});
  const auto service_b = prometheus.Value("gpuslice_tenant_compute_service_seconds_total", {{"gpu", uuid}, {"tenant", "b"}});
  ASSERT_TRUE(service_a && service_b);
  const double share_a = *service_a / (*service_a + *service_b);
  EXPECT_NEAR(share_a * 100, truth_a * 100, 3.0) << "service a=" << *service_a << " s, b=" << *service_b
                                                 << " s; simulator busy a=" << busy.at("a") << " ns, b=" << busy.at("b");
  EXPECT_NEAR(truth_a, 0.75, 0.10) << "the scheduler did not share 75/25: the comparison proves little";
  EXPECT_EQ(prometheus.Value("gpuslice_tenant_compute_request_ratio", {{"tenant", "a"}, {"class", "standard"}}), 0.75);
  // Waits: the 25% tenant waited for the grant; the histogram's count equals its +Inf bucket.
  const auto waits_b = prometheus.Value("gpuslice_tenant_wait_seconds_count", {{"gpu", uuid}, {"tenant", "b"}});
  ASSERT_TRUE(waits_b);
  EXPECT_GT(*waits_b, 0.0);
  EXPECT_EQ(prometheus.Value("gpuslice_tenant_wait_seconds_bucket", {{"tenant", "b"}, {"le", "+Inf"}}), *waits_b);
  EXPECT_TRUE(prometheus.Value("histogram_quantile(0.99, gpuslice_tenant_wait_seconds_bucket{tenant=\"b\"})"));
  EXPECT_GT(prometheus.Value("gpuslice_gpu_grants_total", {{"gpu", uuid}}).value_or(0), 2.0);

  // The exposition passes promtool's linter.
  const auto text = exporter.Metrics();
  ASSERT_TRUE(text);
  const std::string file = state_dir() + "/metrics.txt";
  std::ofstream(file) << *text;
  const ProcessResult lint = gpuslice::testing::Run({"/bin/sh", "-c", promtool + " check metrics < " + file});
  EXPECT_EQ(lint.exit_code, 0) << lint.out << lint.err;
  EXPECT_EQ(lint.out + lint.err, "") << "promtool found problems";
}

}  // namespace
}  // namespace gpuslice::testing
