// gpuslice-exporter without a Prometheus server: its command line, that it keeps serving while
// the broker's state file is missing, appears, disappears and is re-created, that every family
// it can render passes `promtool check metrics`, and that every metric the Grafana dashboard
// (examples/grafana-dashboard.json) queries is one it serves, and that it gzips the page for the
// clients that ask (Prometheus does) and for no other.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "broker/broker.h"
#include "broker/snapshot.h"
#include "exporter/gzip_body.h"
#include "exporter/metrics_text.h"
#include "tests/support/broker_test_util.h"
#include "tests/support/exporter_fixture.h"

namespace gpuslice::testing {
namespace {

using ::testing::HasSubstr;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A snapshot in which every field the exporter reads is set: two GPUs, tenants of each class, a
// quota and no quota, waits in every bucket, a completed share window.
broker::Snapshot FullSnapshot() {
  broker::Snapshot s;
  s.layout_version = broker::kLayoutVersion;
  s.ledger_repairs = 2;
  s.processes_reaped = 5;
  for (int g = 0; g < 2; ++g) {
    broker::GpuView gpu;
    gpu.uuid = "GPU-00000000-0000-0000-0000-00000000000" + std::to_string(g);
    gpu.total_memory = 80ULL << 30;
    gpu.grants = 100;
    gpu.waiting = 1;
    gpu.window_start_ns = 1;
    gpu.share_window_complete = true;
    for (int t = 0; t < 3; ++t) {
      broker::TenantView tenant;
      tenant.name = t == 2 ? "quote\"back\\slash" : "tenant-" + std::to_string(t);
      tenant.quota = t == 0 ? broker::kUnlimited : 4ULL << 30;
      tenant.used = 1ULL << 30;
      tenant.request = t == 1 ? 256ULL << 20 : 0;  // a memory request: 768 MiB of its 1 GiB borrowed
      tenant.request_pct = 30;
      tenant.limit_pct = 90;
      tenant.compute_class = static_cast<uint32_t>(t);
      tenant.service_ns = 1'500'000'000;
      tenant.grants_received = 7;
      tenant.refused_allocations = 3;
      tenant.refused_bytes = 3ULL << 30;
      tenant.last_share_ppm = 333'333;
      for (uint64_t& bucket : tenant.wait_buckets) bucket = 2;
      tenant.waits = 16;
      tenant.wait_ns = 123'456'789;
      tenant.processes.push_back({42, 1ULL << 30});
      gpu.tenants.push_back(tenant);
    }
    s.gpus.push_back(gpu);
  }
  return s;
}

std::vector<exporter::DeviceFigures> Devices() {
  return {
      {"GPU-00000000-0000-0000-0000-000000000000", "NVIDIA H100 (simulated)", 0, 80ULL << 30, 1ULL << 30, 50u, 3u, {}},
      {"GPU-00000000-0000-0000-0000-000000000001", "NVIDIA H100 (simulated)", 1, 80ULL << 30, 0, 0u, 0u, {}}};
}

std::string FullExposition() {
  const broker::Snapshot snapshot = FullSnapshot();
  const auto devices = Devices();
  std::string text;
  exporter::RenderMetrics({&snapshot, &devices}, &text);
  return text;
}

TEST(ExporterTest, EveryFamilyPassesPromtool) {
  const std::string promtool = FindProgram("promtool");
  if (promtool.empty())
    GTEST_SKIP() << "promtool is not installed (Debian's prometheus package; scripts/install-deps.sh)";
  BrokerTempDir dir;
  const std::string file = dir.root() + "/metrics.txt";
  std::ofstream(file) << FullExposition();
  const ProcessResult lint = gpuslice::testing::Run({"/bin/sh", "-c", promtool + " check metrics < " + file});
  EXPECT_EQ(lint.exit_code, 0) << lint.out << lint.err;
  EXPECT_EQ(lint.out + lint.err, "");
}

// A tenant's memory request and what it borrows beyond it; no request: no request series, and all
// it holds is borrowed (docs/accounting.md, "Requests and limits").
TEST(ExporterTest, MemoryRequestsAndBorrowedBytesArePerTenant) {
  const std::string text = FullExposition();
  auto labels = [](const std::string& tenant) {
    return "{gpu=\"GPU-00000000-0000-0000-0000-000000000000\",tenant=\"" + tenant +
           "\",namespace=\"\",pod=\"\",container=\"\"}";
  };
  EXPECT_THAT(text, HasSubstr("gpuslice_tenant_memory_request_bytes" + labels("tenant-1") + " 268435456\n"));
  EXPECT_THAT(text, ::testing::Not(HasSubstr("gpuslice_tenant_memory_request_bytes" + labels("tenant-0"))));
  EXPECT_THAT(text, HasSubstr("gpuslice_tenant_memory_borrowed_bytes" + labels("tenant-1") + " 805306368\n"));
  EXPECT_THAT(text, HasSubstr("gpuslice_tenant_memory_borrowed_bytes" + labels("tenant-0") + " 1073741824\n"));
}

TEST(ExporterTest, HistogramIsCumulativeAndLabelValuesAreEscaped) {
  const std::string text = FullExposition();
  const std::string labels =
      "gpu=\"GPU-00000000-0000-0000-0000-000000000000\",tenant=\"tenant-1\",namespace=\"\",pod=\"\",container=\"\"";
  // 18 buckets of 2 waits each, 50 us to 10 s (1, 2.5, 5 steps), cumulative.
  EXPECT_THAT(text, HasSubstr("gpuslice_tenant_wait_seconds_bucket{" + labels + ",le=\"5e-05\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("gpuslice_tenant_wait_seconds_bucket{" + labels + ",le=\"0.0001\"} 4\n"));
  EXPECT_THAT(text, HasSubstr("gpuslice_tenant_wait_seconds_bucket{" + labels + ",le=\"0.25\"} 24\n"));
  EXPECT_THAT(text, HasSubstr("gpuslice_tenant_wait_seconds_bucket{" + labels + ",le=\"0.5\"} 26\n"));
  EXPECT_THAT(text, HasSubstr("gpuslice_tenant_wait_seconds_bucket{" + labels + ",le=\"1\"} 28\n"));
  EXPECT_THAT(text, HasSubstr("gpuslice_tenant_wait_seconds_bucket{" + labels + ",le=\"10\"} 34\n"));
  EXPECT_THAT(text, HasSubstr("gpuslice_tenant_wait_seconds_bucket{" + labels + ",le=\"+Inf\"} 36\n"));
  EXPECT_THAT(text, HasSubstr("gpuslice_tenant_wait_seconds_count{" + labels + "} 36\n"));
  EXPECT_THAT(text, HasSubstr("gpuslice_tenant_wait_seconds_sum{" + labels + "} 0.123456789\n"));
  EXPECT_THAT(text, HasSubstr("tenant=\"quote\\\"back\\\\slash\""));
  EXPECT_THAT(text, HasSubstr("gpuslice_tenant_compute_request_ratio{" + labels + "} 0.3\n"));
  EXPECT_THAT(text, HasSubstr("gpuslice_tenant_info{" + labels + ",class=\"latency\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("gpuslice_tenant_memory_used_bytes{" + labels + "} 1073741824\n"));
  // tenant-0 has no quota: no quota sample rather than 2^64-1.
  EXPECT_THAT(text, ::testing::Not(HasSubstr(
                        "memory_quota_bytes{gpu=\"GPU-00000000-0000-0000-0000-000000000000\",tenant=\"tenant-0\",")));
}

TEST(ExporterTest, GrafanaDashboardQueriesOnlyMetricsTheExporterServes) {
  const auto dashboard = nlohmann::json::parse(ReadFile(SourceDir() + "/examples/grafana-dashboard.json"));
  std::set<std::string> names;
  const std::regex metric(R"(gpuslice_[a-z0-9_]+)");
  std::function<void(const nlohmann::json&)> visit = [&](const nlohmann::json& node) {
    if (node.is_object()) {
      for (const auto& [key, value] : node.items()) {
        if ((key == "expr" || key == "definition") && value.is_string()) {
          const std::string expr = value.get<std::string>();
          for (std::sregex_iterator it(expr.begin(), expr.end(), metric), end; it != end; ++it) names.insert(it->str());
        } else {
          visit(value);
        }
      }
    } else if (node.is_array()) {
      for (const auto& item : node) visit(item);
    }
  };
  visit(dashboard);
  ASSERT_GE(names.size(), 15u) << "the dashboard queries fewer metrics than expected: was it emptied?";
  const std::string text = FullExposition();
  for (const auto& name : names) {
    EXPECT_TRUE(text.find("\n" + name + "{") != std::string::npos || text.find("\n" + name + " ") != std::string::npos)
        << "the dashboard queries " << name << ", which gpuslice-exporter does not serve";
  }
}

// --- the process ---

std::string MetricsOrEmpty(Exporter& exporter) { return exporter.Metrics().value_or(""); }

TEST(ExporterProcessTest, KeepsServingWhileTheStateFileIsMissingAppearsAndIsRecreated) {
  BrokerTempDir dir;
  Exporter exporter(dir.state_dir(), dir.root() + "/no-sim-state");
  ASSERT_TRUE(exporter.WaitServing()) << exporter.process().StderrSoFar();
  EXPECT_EQ(HttpGet(exporter.port(), "/healthz"), "ok\n");
  EXPECT_THAT(MetricsOrEmpty(exporter), HasSubstr("\ngpuslice_segment_up 0\n"));

  auto tenant = [&](uint64_t bytes) {
    std::string error;
    auto broker = ValueOf(broker::Broker::Attach(dir.state_dir()));
    EXPECT_TRUE(broker);
    EXPECT_TRUE(IsOk(broker->Register("team-a")));
    const Result<broker::LedgerId> ledger_or = broker->OpenLedger(kTestUuid, kTestGpuTotal, 64 * kMiB);
    EXPECT_TRUE(IsOk(ledger_or));
    const broker::LedgerId ledger = *ledger_or;
    EXPECT_TRUE(broker->Reserve(ledger, bytes));
    EXPECT_FALSE(broker->Reserve(ledger, 64 * kMiB));
    return broker;
  };
  {
    auto broker = tenant(5 * kMiB);
    const std::string labels =
        "{gpu=\"GPU-11223344-5566-7788-99aa-bbccddeeff01\",tenant=\"team-a\",namespace=\"\",pod=\"\",container=\"\"}";
    // Its first scrape: the counters at 0 (a series created at 0, so that rate() sees the
    // refusal); the gauges as they are.
    std::string text = MetricsOrEmpty(exporter);
    EXPECT_THAT(text, HasSubstr("\ngpuslice_segment_up 1\n"));
    EXPECT_THAT(text, HasSubstr("gpuslice_tenant_memory_used_bytes" + labels + " 5242880\n"));
    EXPECT_THAT(text, HasSubstr("gpuslice_tenant_refused_allocations_total" + labels + " 0\n"));
    EXPECT_THAT(text, HasSubstr("gpuslice_tenant_processes" + labels + " 1\n"));
    text = MetricsOrEmpty(exporter);  // the next scrape: the counters' values
    EXPECT_THAT(text, HasSubstr("gpuslice_tenant_refused_allocations_total" + labels + " 1\n"));
    EXPECT_THAT(text, HasSubstr("gpuslice_tenant_refused_bytes_total" + labels + " 67108864\n"));
  }
  std::filesystem::remove(dir.state_file());
  EXPECT_THAT(MetricsOrEmpty(exporter), HasSubstr("\ngpuslice_segment_up 0\n"));
  auto broker = tenant(7 * kMiB);  // a new file: new figures, the old ones gone
  const std::string text = MetricsOrEmpty(exporter);
  EXPECT_THAT(text, HasSubstr("\ngpuslice_segment_up 1\n"));
  EXPECT_THAT(text, HasSubstr("tenant=\"team-a\",namespace=\"\",pod=\"\",container=\"\"} 7340032\n"));
  EXPECT_TRUE(exporter.process().running());
  // The state file's absence was logged once, and its return.
  EXPECT_THAT(exporter.process().StderrSoFar(), HasSubstr("state file: available again"));
}

// A name that is not UTF-8 (a tenant name written by anyone with access to the state file, a
// forged pods.json) must not bring the node's whole target down: Prometheus refuses a page with
// an invalid UTF-8 label value. Every label value comes out printable ASCII (\xNN).
TEST(ExporterProcessTest, BadBytesInNamesNeverMakeThePageInvalid) {
  BrokerTempDir dir;
  Exporter exporter(dir.state_dir(), dir.root() + "/no-sim-state");
  ASSERT_TRUE(exporter.WaitServing()) << exporter.process().StderrSoFar();
  std::string error;
  auto broker = ValueOf(broker::Broker::Attach(dir.state_dir()));
  ASSERT_TRUE(broker);
  const std::string bad = "bad\xff\xfe\x1bname";
  ASSERT_TRUE(IsOk(broker->Register(bad)));
  ASSERT_TRUE(IsOk(broker->OpenLedger(kTestUuid, kTestGpuTotal, 64 * kMiB)));
  // The plugin's map names the tenant (as the snapshot prints it) with a pod of odd characters.
  std::ofstream(TestPodsFile(dir.state_dir()))
      << R"({"tenants": {"bad\\xff\\xfe\\x1bname": {"namespace": "ns", "pod": "p\u00ff\u001b", "container": "c"}}})";
  const std::string text = MetricsOrEmpty(exporter);
  ASSERT_THAT(text, HasSubstr("tenant=\"bad\\\\xff\\\\xfe\\\\x1bname\""));
  ASSERT_THAT(text, HasSubstr("namespace=\"ns\",pod=\"p\\\\xc3\\\\xbf\\\\x1b\",container=\"c\""));
  for (const unsigned char c : text) ASSERT_LT(c, 0x80) << "a byte outside ASCII in the page";
  const std::string promtool = FindProgram("promtool");
  if (promtool.empty()) return;
  std::ofstream(dir.root() + "/metrics.txt") << text;
  const ProcessResult lint =
      gpuslice::testing::Run({"/bin/sh", "-c", promtool + " check metrics < " + dir.root() + "/metrics.txt"});
  EXPECT_EQ(lint.exit_code, 0) << lint.out << lint.err;
}

// A state directory the exporter's user may not enter (the shim made it 0770 in the first
// tenant's group) is logged with its owner, group and mode, the exporter's uid and the fix, not
// only as gpuslice_segment_up 0.
TEST(ExporterProcessTest, AStateDirectoryItMayNotEnterIsLoggedWithItsOwnerModeAndTheFix) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root, to run the exporter as another user";
  constexpr char kSetpriv[] = "/usr/bin/setpriv";
  if (access(kSetpriv, X_OK) != 0) GTEST_SKIP() << kSetpriv << " is not installed";
  BrokerTempDir dir;
  std::string error;
  auto broker = ValueOf(broker::Broker::Attach(dir.state_dir()));
  ASSERT_TRUE(broker);
  ASSERT_EQ(chmod(dir.root().c_str(), 0755), 0);
  ASSERT_EQ(chmod(dir.state_dir().c_str(), 0770), 0);
  const int port = FreeLoopbackPort();
  Subprocess exporter({kSetpriv, "--reuid=65534", "--regid=65534", "--clear-groups", BinDir() + "/gpuslice-exporter",
                       "--listen", "127.0.0.1:" + std::to_string(port), "--state-dir", dir.state_dir()},
                      {"LD_LIBRARY_PATH=" + SimLibDir(), "GPUSLICE_SIM_STATE=" + dir.root() + "/no-sim-state"},
                      Inherit::kAllButGpuslice);
  std::optional<std::string> metrics;
  for (int i = 0; i < 500 && !metrics; ++i) {
    metrics = HttpGet(port, "/metrics");
    if (!metrics) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(metrics) << exporter.StderrSoFar();
  EXPECT_THAT(*metrics, HasSubstr("\ngpuslice_segment_up 0\n"));
  EXPECT_THAT(exporter.StderrSoFar(),
              HasSubstr("cannot open state file " + dir.state_file() + ": permission denied: " + dir.state_dir() +
                        " is owned by uid 0, group root (gid 0), mode 0770, and uid 65534 (groups nogroup (gid "
                        "65534)) may not enter it: run as a member of group root (gid 0) (systemd: "
                        "SupplementaryGroups="));
}

TEST(ExporterProcessTest, BadFlagsAreRefusedWithOneClearLine) {
  const std::string exe = BinDir() + "/gpuslice-exporter";
  ProcessResult r = gpuslice::testing::Run({exe, "--listen", "localhost"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--listen 'localhost' has no port (expected HOST:PORT"));
  r = gpuslice::testing::Run({exe, "--listen", "127.0.0.1:99999"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("'99999' is not a port"));
  r = gpuslice::testing::Run({exe, "--listen", "::1:9457"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("must be written in brackets"));
  // Not an address: a usage error (2), found before trying to listen.
  r = gpuslice::testing::Run({exe, "--listen", "300.1.1.1:9457"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("'300.1.1.1' is not an address or a name this machine resolves"));
  r = gpuslice::testing::Run({exe, "--listen", "http://127.0.0.1:9457"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("is a URL; give the address alone"));
  // An address of another machine: it cannot listen (1), and says why.
  r = gpuslice::testing::Run({exe, "--listen", "192.0.2.1:9457"}, {}, 10000);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("is not an address of this machine"));
  r = gpuslice::testing::Run({exe, "--frobnicate"});
  EXPECT_EQ(r.exit_code, 2);
  r = gpuslice::testing::Run({exe, "--version"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.out, HasSubstr("gpuslice-exporter "));
  r = gpuslice::testing::Run({exe, "--help"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.out, HasSubstr("--listen"));
  EXPECT_THAT(r.out, HasSubstr("/healthz"));
  // A port somebody else listens on: exit 1, saying so.
  Exporter first("/nonexistent", "/nonexistent");
  ASSERT_TRUE(first.WaitServing());
  r = gpuslice::testing::Run({exe, "--listen", "127.0.0.1:" + std::to_string(first.port())}, {}, 10000);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("cannot listen on 127.0.0.1:"));
  EXPECT_THAT(r.err, HasSubstr("is in use by another process"));
}

// --- compression: the exporter gzips the page itself, at level 1 (exporter/gzip_body.h) ---

TEST(ExporterGzipTest, AcceptEncodingIsReadAsRfc9110Says) {
  using exporter::AcceptsGzip;
  EXPECT_TRUE(AcceptsGzip("gzip"));                     // Prometheus
  EXPECT_TRUE(AcceptsGzip("deflate, gzip, br, zstd"));  // curl --compressed
  EXPECT_TRUE(AcceptsGzip("br;q=1.0, GZIP;q=0.5"));
  EXPECT_TRUE(AcceptsGzip("x-gzip"));
  EXPECT_TRUE(AcceptsGzip("*"));
  EXPECT_FALSE(AcceptsGzip(""));  // no header: identity only
  EXPECT_FALSE(AcceptsGzip("identity"));
  EXPECT_FALSE(AcceptsGzip("br"));
  EXPECT_FALSE(AcceptsGzip("gzip;q=0"));
  EXPECT_FALSE(AcceptsGzip("gzip; q=0.000, *"));  // named and refused: "*" does not bring it back
  EXPECT_FALSE(AcceptsGzip("*;q=0"));
}

// Text that does not compress: the output outgrows the first guess at its size, several times.
TEST(ExporterGzipTest, IncompressibleTextRoundTrips) {
  std::string text(300'000, '\0');
  uint32_t x = 12345;
  for (char& c : text) c = static_cast<char>((x = x * 1103515245 + 12345) >> 24);
  std::string gz;
  ASSERT_TRUE(exporter::Gzip(text, exporter::kGzipLevel, &gz));
  ASSERT_GT(gz.size(), text.size());
  z_stream z{};
  ASSERT_EQ(inflateInit2(&z, 15 + 16), Z_OK);
  std::string back(text.size() + 1, '\0');
  z.next_in = reinterpret_cast<Bytef*>(gz.data());
  z.avail_in = static_cast<uInt>(gz.size());
  z.next_out = reinterpret_cast<Bytef*>(back.data());
  z.avail_out = static_cast<uInt>(back.size());
  EXPECT_EQ(inflate(&z, Z_FINISH), Z_STREAM_END);
  back.resize(z.total_out);
  inflateEnd(&z);
  EXPECT_TRUE(back == text);
}

// One GET of the exporter's /metrics by curl (a client of its own, in its own process), the body
// as it came over the wire unless `decode`, and the response's headers.
struct Fetched {
  std::string headers, body;
};
Fetched Curl(const std::string& dir, int port, std::vector<std::string> args) {
  const std::string curl = FindProgram("curl");
  std::vector<std::string> argv = {curl, "-sS", "--fail", "-D", dir + "/headers", "-o", dir + "/body"};
  argv.insert(argv.end(), args.begin(), args.end());
  argv.push_back("http://127.0.0.1:" + std::to_string(port) + "/metrics");
  const ProcessResult r = gpuslice::testing::Run(argv, {}, 20000);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return {ReadFile(dir + "/headers"), ReadFile(dir + "/body")};
}

TEST(ExporterGzipTest, GzipDecodesToTheIdentityPageAndOnlyClientsThatAskGetIt) {
  if (FindProgram("curl").empty()) GTEST_FAIL() << "curl is not installed (scripts/install-deps.sh)";
  BrokerTempDir dir;
  Exporter exporter(dir.state_dir(), dir.root() + "/no-sim-state");
  ASSERT_TRUE(exporter.WaitServing()) << exporter.process().StderrSoFar();
  // Tenants on 16 GPUs: a page of ~100 KB, more than one write of httplib's and zlib's buffers.
  std::vector<std::unique_ptr<broker::Broker>> tenants;
  for (int t = 0; t < 4; ++t) {
    std::string error;
    auto broker = ValueOf(broker::Broker::Attach(dir.state_dir()));
    ASSERT_TRUE(broker);
    ASSERT_TRUE(IsOk(broker->Register("team-" + std::to_string(t))));
    for (uint8_t g = 0; g < 16; ++g) {
      uint8_t uuid[16];
      std::copy(std::begin(kTestUuid), std::end(kTestUuid), uuid);
      uuid[15] = g;
      const Result<broker::LedgerId> ledger_or = broker->OpenLedger(uuid, kTestGpuTotal, 64 * kMiB);
      ASSERT_TRUE(IsOk(ledger_or));
      const broker::LedgerId ledger = *ledger_or;
      ASSERT_TRUE(broker->Reserve(ledger, (t + 1) * kMiB));
    }
    tenants.push_back(std::move(broker));
  }
  const auto content_encoding = [](const std::string& headers) {
    std::smatch m;
    return std::regex_search(headers, m, std::regex("(^|\n)content-encoding: *([^\r\n]*)", std::regex::icase))
               ? m[2].str()
               : std::string("(none)");
  };

  // No Accept-Encoding (curl's default): the page as it is.
  const Fetched plain = Curl(dir.root(), exporter.port(), {});
  EXPECT_EQ(content_encoding(plain.headers), "(none)");
  ASSERT_THAT(plain.body, HasSubstr("tenant=\"team-3\""));
  EXPECT_GT(plain.body.size(), 50'000u);
  EXPECT_EQ(plain.body.rfind("# HELP ", 0), 0u) << plain.body.substr(0, 200);

  // As Prometheus asks: gzip once, which Python's gzip module decodes to exactly that page (a
  // second compression by httplib would decode to gzip bytes, not the page).
  const Fetched gz = Curl(dir.root(), exporter.port(), {"-H", "Accept-Encoding: gzip"});
  EXPECT_EQ(content_encoding(gz.headers), "gzip");
  EXPECT_LT(gz.body.size(), plain.body.size() / 4);
  const ProcessResult decoded = gpuslice::testing::Run(
      {FindProgram("python3"), "-c",
       "import gzip,sys; sys.stdout.buffer.write(gzip.decompress(open(sys.argv[1],'rb').read()))",
       dir.root() + "/body"});
  ASSERT_EQ(decoded.exit_code, 0) << decoded.err;
  EXPECT_TRUE(decoded.out == plain.body) << "the gzip page decodes to " << decoded.out.size() << " bytes, not the "
                                         << plain.body.size() << " of the page";

  // curl --compressed offers deflate, gzip, br and zstd: it gets gzip (not httplib's brotli) and
  // decodes it to the same page.
  const Fetched compressed = Curl(dir.root(), exporter.port(), {"--compressed"});
  EXPECT_EQ(content_encoding(compressed.headers), "gzip");
  EXPECT_TRUE(compressed.body == plain.body) << "curl --compressed decoded " << compressed.body.size() << " bytes";

  // Clients that refuse gzip get the page as it is, never brotli from httplib.
  for (const char* refusing :
       {"Accept-Encoding: br", "Accept-Encoding: gzip;q=0, identity", "Accept-Encoding: identity"}) {
    const Fetched other = Curl(dir.root(), exporter.port(), {"-H", refusing});
    EXPECT_EQ(content_encoding(other.headers), "(none)") << refusing;
    EXPECT_TRUE(other.body == plain.body) << refusing << ": " << other.body.size() << " bytes";
  }
}

}  // namespace
}  // namespace gpuslice::testing
