// gpuslice-exporter scraped by a real Prometheus server (Debian's `prometheus`, every second,
// evaluating deploy/prometheus/gpuslice-alerts.yaml): tenants run over the simulated GPU through
// the LD_PRELOADed shim, and the series Prometheus stored are checked against the simulator's
// ground truth and the broker: memory used exactly, refused allocations exactly, each tenant's
// share of the device time within 3 points; the refusal alert fires for a tenant refused in its
// first second; share series end with their tenants; a SIGKILLed tenant's memory leaves the
// metrics at the next scrape; shares add up to at most the whole GPU with a latency tenant.
// `promtool check metrics` lints the exposition. Skipped, with the reason, only when the
// prometheus binary is absent (scripts/install-deps.sh installs it; CI has it).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <functional>
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
  Prometheus prometheus(exporter.port(), SourceDir() + "/deploy/prometheus/gpuslice-alerts.yaml");
  ASSERT_TRUE(Within(20, [&] { return prometheus.Value("gpuslice_segment_up").has_value(); }))
      << "Prometheus never scraped the exporter:\n"
      << prometheus.Log();
  EXPECT_EQ(prometheus.Value("gpuslice_segment_up"), 0.0) << "no state file exists yet";

  // A memory tenant: quota 100 MiB, five 48 MiB allocations: two granted, three refused.
  StartOptions memory;
  memory.env = {"GPUSLICE_MEMORY_LIMIT=100Mi"};
  Child* holder = gpu().StartReady("mem", {"memory", "--chunk", "48Mi", "--count", "5", "--hold", "60"}, memory);
  ASSERT_NE(holder, nullptr);
  ASSERT_TRUE(holder->WaitForOutput("\"event\":\"holding\"")) << holder->Stderr();
  // Two compute-bound tenants asking for 75% and 25%, long enough for a share window (10 s).
  const Sample before = gpu().Take();
  Child* a = gpu().StartReady("a", kComputeBound, Managed(75));
  Child* b = gpu().StartReady("b", kComputeBound, Managed(25));
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  // The memory tenant was refused three times in its first second, before any scrape saw it:
  // its counter's first sample is 0, so the refusal alert fires.
  EXPECT_TRUE(Within(20, [&] {
    return prometheus
        .Value("ALERTS", {{"alertname", "GpusliceQuotaRefusals"}, {"tenant", "mem"}, {"alertstate", "firing"}})
        .has_value();
  })) << "the refusal alert never fired for a tenant refused before its first scrape";
  const std::map<std::string, std::string> a_labels = {{"tenant", "a"}};
  EXPECT_TRUE(Within(15, [&] { return prometheus.Value("gpuslice_tenant_compute_share_ratio", a_labels).has_value(); }))
      << "no share window completed";
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
  // The share gauge ends with its tenant (it read the last window's share for ever before).
  EXPECT_FALSE(prometheus.Value("gpuslice_tenant_compute_share_ratio", a_labels).has_value())
      << "a tenant with no process still has a share";
  EXPECT_EQ(prometheus.Value("gpuslice_tenant_memory_used_bytes", mem_labels), static_cast<double>(sim_memory));
  EXPECT_EQ(prometheus.Value("gpuslice_tenant_memory_quota_bytes", mem_labels), static_cast<double>(100 * kMiB));
  EXPECT_EQ(prometheus.Value("gpuslice_tenant_refused_allocations_total", mem_labels), 3.0);
  EXPECT_EQ(prometheus.Value("gpuslice_tenant_refused_bytes_total", mem_labels), 3.0 * 48 * kMiB);
  EXPECT_EQ(prometheus.Value("gpuslice_device_memory_used_bytes", {{"gpu", uuid}}),
            static_cast<double>(sim.devices[0].used_memory));
  const auto service_a =
      prometheus.Value("gpuslice_tenant_compute_service_seconds_total", {{"gpu", uuid}, {"tenant", "a"}});
  const auto service_b =
      prometheus.Value("gpuslice_tenant_compute_service_seconds_total", {{"gpu", uuid}, {"tenant", "b"}});
  ASSERT_TRUE(service_a && service_b);
  const double share_a = *service_a / (*service_a + *service_b);
  EXPECT_NEAR(share_a * 100, truth_a * 100, 3.0)
      << "service a=" << *service_a << " s, b=" << *service_b << " s; simulator busy a=" << busy.at("a")
      << " ns, b=" << busy.at("b");
  EXPECT_NEAR(truth_a, 0.75, 0.10) << "the scheduler did not share 75/25: the comparison proves little";
  EXPECT_EQ(prometheus.Value("gpuslice_tenant_compute_request_ratio", {{"tenant", "a"}}), 0.75);
  EXPECT_EQ(prometheus.Value("gpuslice_tenant_info", {{"tenant", "a"}, {"class", "standard"}}), 1.0);
  // One label set per family: a tenant's service over its request needs no ignoring().
  EXPECT_TRUE(prometheus.Value("gpuslice_tenant_compute_service_seconds_total / gpuslice_tenant_compute_request_ratio",
                               a_labels));
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

  // The dashboard's queries against this live Prometheus: every one valid PromQL, and all but
  // the share panel (its tenants have exited) return data.
  const auto dashboard =
      nlohmann::json::parse(std::ifstream(SourceDir() + "/examples/grafana-dashboard.json"), nullptr, false);
  ASSERT_FALSE(dashboard.is_discarded());
  std::vector<std::string> queries;
  std::function<void(const nlohmann::json&)> visit = [&](const nlohmann::json& node) {
    if (node.is_object()) {
      for (const auto& [key, value] : node.items()) {
        if (key == "expr" && value.is_string()) queries.push_back(value.get<std::string>());
        else visit(value);
      }
    } else if (node.is_array()) {
      for (const auto& item : node) visit(item);
    }
  };
  visit(dashboard);
  ASSERT_GE(queries.size(), 15u);
  int with_data = 0;
  std::string empty;
  for (std::string query : queries) {
    for (const std::string variable : {"$gpu", "$tenant"}) {
      for (size_t at; (at = query.find(variable)) != std::string::npos;) query.replace(at, variable.size(), ".*");
    }
    const auto result = prometheus.Query(query);
    EXPECT_FALSE(result.is_null()) << "the dashboard's query fails: " << query;
    if (result.is_array() && !result.empty()) ++with_data;
    else empty += "\n  " + query;
  }
  std::printf("dashboard: %d of %zu queries return data; empty:%s\n", with_data, queries.size(), empty.c_str());
  EXPECT_GE(with_data, static_cast<int>(queries.size()) - 2) << "empty:" << empty;

  // SIGKILLed, the memory tenant's bytes leave the metrics at the next scrape, though nothing
  // reaps it (the exporter reads read-only and no other gpuslice process runs).
  holder->Kill(SIGKILL);
  holder->Wait();
  EXPECT_TRUE(Within(3, [&] { return prometheus.Value("gpuslice_tenant_memory_used_bytes", mem_labels) == 0.0; }))
      << "a killed tenant's memory stayed in the metrics";
}

// A latency-class service beside a standard trainer: the two tenants' shares of the device time
// (rates of their service counters) add up to at most the whole GPU, so that 1 - their sum is
// idle time. Both used to be charged for the service's launches beside the trainer (106%).
TEST_F(ExporterPrometheusTest, SharesAddUpToAtMostTheGpuWithALatencyTenant) {
  if (Prometheus::Binary().empty()) GTEST_SKIP() << "prometheus is not installed (scripts/install-deps.sh installs it)";
  Exporter exporter(state_dir(), state_path());
  ASSERT_TRUE(exporter.WaitServing()) << exporter.process().StderrSoFar();
  Prometheus prometheus(exporter.port());
  StartOptions latency = Managed(30);
  latency.env = {"GPUSLICE_COMPUTE_CLASS=latency"};
  ASSERT_NE(gpu().StartReady("service", {"latency", "--period-ms", "10", "--kernel-us", "1000", "--duration", "60"},
                             latency),
            nullptr);
  ASSERT_NE(gpu().StartReady("trainer", kComputeBound, Managed(70)), nullptr);
  // Two readings of the summed service counters, 8 s apart, after the series exist.
  const std::string query = "sum(gpuslice_tenant_compute_service_seconds_total)";
  ASSERT_TRUE(Within(10, [&] { return prometheus.Value(query).value_or(0) > 0; })) << prometheus.Log();
  const auto t1 = std::chrono::steady_clock::now();
  const double s1 = prometheus.Value(query).value_or(0);
  SleepFor(8);
  const double s2 = prometheus.Value(query).value_or(0);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
  const double sum = (s2 - s1) / wall;
  std::printf("sum of the tenants' shares over %.1f s: %.3f\n", wall, sum);
  EXPECT_LE(sum, 1.03) << "the tenants were charged more than the device's time";
  EXPECT_GT(sum, 0.5) << "the tenants hardly ran: the sum proves little";
}

}  // namespace
}  // namespace gpuslice::testing
