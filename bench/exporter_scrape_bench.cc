// What one Prometheus scrape of gpuslice-exporter costs on a full node: 8 GPUs with 64 tenants
// each (512 tenant series of every family), the target being at most 5 ms a scrape and
// at most 20 MiB of resident memory for the exporter (docs/observability.md records the figures).
//
// The segment is real: 64 forked processes register as tenants, open a ledger on each of 8 GPUs
// and reserve memory there, then wait to be killed. Three benchmarks, from the inside out:
//   BM_RenderMetrics   formatting a snapshot already taken (exporter/metrics_text.h)
//   BM_SnapshotAndRender  mapping the state file read-only, reading it and formatting it: what the
//                      exporter does for each scrape, without HTTP
//   BM_HttpScrape      GET /metrics from a running gpuslice-exporter over loopback, as Prometheus
//                      does (gzip:1, which costs the exporter the compression) or uncompressed
//                      (gzip:0); its counters report the exporter's CPU time per scrape, its peak
//                      resident memory (VmHWM) and the size of the page as sent
#include <benchmark/benchmark.h>
#include <httplib.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "broker/broker.h"
#include "broker/snapshot.h"
#include "exporter/metrics_text.h"

namespace {

constexpr int kGpus = 8;
constexpr int kTenants = 64;

// The node: a state directory under /dev/shm with kTenants processes on kGpus GPUs.
class Node {
 public:
  Node() {
    char pattern[] = "/dev/shm/gpuslice-scrape-bench-XXXXXX";
    root_ = mkdtemp(pattern);
    state_dir_ = root_ + "/state";
    int ready[2];
    if (pipe(ready) != 0) std::abort();
    for (int t = 0; t < kTenants; ++t) {
      const pid_t pid = fork();
      if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the benchmark, even if it crashes
        close(ready[0]);
        auto attached = gpuslice::broker::Broker::Attach(state_dir_);
        if (!attached.ok()) _exit(1);
        const std::unique_ptr<gpuslice::broker::Broker> broker = std::move(attached).value();
        if (!broker->Register("tenant-" + std::to_string(t)).ok()) _exit(1);
        for (int g = 0; g < kGpus; ++g) {
          uint8_t uuid[16] = {0x42, static_cast<uint8_t>(g), 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14};
          const gpuslice::Result<gpuslice::broker::LedgerId> ledger = broker->OpenLedger(uuid, 80ULL << 30, 1ULL << 30);
          if (!ledger.ok() || !broker->Reserve(*ledger, (t + 1) << 20)) _exit(1);
          (void)broker->Reserve(*ledger, 2ULL << 30);  // refused: the counters are not all zero
        }
        char byte = 1;
        if (write(ready[1], &byte, 1) != 1) _exit(1);
        while (true) pause();
      }
      pids_.push_back(pid);
    }
    close(ready[1]);
    for (int t = 0; t < kTenants; ++t) {
      char byte;
      if (read(ready[0], &byte, 1) != 1) {
        std::fprintf(stderr, "exporter_scrape_bench: a tenant process failed to set up\n");
        std::abort();
      }
    }
    close(ready[0]);
  }
  ~Node() {
    for (pid_t pid : pids_) kill(pid, SIGKILL);
    for (pid_t pid : pids_) waitpid(pid, nullptr, 0);
    std::error_code ignored;
    std::filesystem::remove_all(root_, ignored);
  }
  const std::string& state_dir() const { return state_dir_; }

 private:
  std::string root_, state_dir_;
  std::vector<pid_t> pids_;
};

Node& TheNode() {
  static Node node;
  return node;
}

void BM_RenderMetrics(benchmark::State& state) {
  gpuslice::Result<gpuslice::broker::Snapshot> taken = gpuslice::broker::TakeReadOnlySnapshot(TheNode().state_dir());
  if (!taken.ok()) {
    state.SkipWithError(taken.message().c_str());
    return;
  }
  const gpuslice::broker::Snapshot& snapshot = *taken;
  std::string text;
  for (auto _ : state) {
    gpuslice::exporter::RenderMetrics({&snapshot, nullptr}, &text);
    benchmark::DoNotOptimize(text.data());
  }
  state.counters["bytes"] = static_cast<double>(text.size());
}
BENCHMARK(BM_RenderMetrics)->Unit(benchmark::kMicrosecond);

void BM_SnapshotAndRender(benchmark::State& state) {
  std::string text;
  size_t tenants = 0;
  for (auto _ : state) {
    gpuslice::Result<gpuslice::broker::Snapshot> taken = gpuslice::broker::TakeReadOnlySnapshot(TheNode().state_dir());
    if (!taken.ok()) {
      state.SkipWithError(taken.message().c_str());
      return;
    }
    const gpuslice::broker::Snapshot& snapshot = *taken;
    gpuslice::exporter::RenderMetrics({&snapshot, nullptr}, &text);
    tenants = 0;
    for (const auto& gpu : snapshot.gpus) tenants += gpu.tenants.size();
  }
  state.counters["tenant_series"] = static_cast<double>(tenants);
}
BENCHMARK(BM_SnapshotAndRender)->Unit(benchmark::kMicrosecond);

long PeakRssKib(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::strtol(line.c_str() + 6, nullptr, 10);
  return -1;
}

// The process's CPU time so far (user + system), in seconds.
double CpuSeconds(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), {});
  const size_t close = text.rfind(')');  // the command may hold spaces
  if (close == std::string::npos) return 0;
  std::istringstream fields(text.substr(close + 2));
  std::string field;
  double ticks = 0;
  for (int i = 3; i <= 15 && fields >> field; ++i)
    if (i == 14 || i == 15) ticks += std::strtod(field.c_str(), nullptr);  // utime, stime
  return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
}

void BM_HttpScrape(benchmark::State& state) {
  const char* bin = std::getenv("GPUSLICE_BIN_DIR");
  const std::string exporter = std::string(bin ? bin : GPUSLICE_BENCH_BIN_DIR) + "/gpuslice-exporter";
  const int port = 19400 + getpid() % 500;
  const pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    const std::string listen = "127.0.0.1:" + std::to_string(port);
    execl(exporter.c_str(), exporter.c_str(), "--listen", listen.c_str(), "--state-dir", TheNode().state_dir().c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  httplib::Client client("127.0.0.1", port);
  client.set_keep_alive(true);
  client.set_decompress(false);  // the size of the page as sent
  bool up = false;
  for (int i = 0; i < 200 && !up; ++i) {
    auto r = client.Get("/healthz");
    up = r && r->status == 200;
    if (!up) usleep(20000);
  }
  size_t bytes = 0;
  const double cpu_before = CpuSeconds(pid);
  for (auto _ : state) {
    if (!up) {
      state.SkipWithError(("gpuslice-exporter did not start: " + exporter).c_str());
      break;
    }
    // As Prometheus asks (gzip), or uncompressed: the exporter compresses what the client accepts
    // (at zlib level 1, exporter/gzip_body.h).
    auto r = client.Get("/metrics", {{"Accept-Encoding", state.range(0) ? "gzip" : "identity"}});
    if (!r || r->status != 200) {
      state.SkipWithError("GET /metrics failed");
      break;
    }
    if (r->get_header_value("Content-Encoding") != (state.range(0) ? "gzip" : "")) {
      state.SkipWithError("/metrics came in another encoding than the one asked for");
      break;
    }
    bytes = r->body.size();
  }
  state.counters["bytes"] = static_cast<double>(bytes);
  // The exporter's own CPU time per scrape: on a loaded machine the wall time includes waiting
  // for a core, this does not (10 ms clock ticks: meaningful over many iterations).
  state.counters["exporter_cpu_ms_per_scrape"] = (CpuSeconds(pid) - cpu_before) * 1000.0 /
                                                 static_cast<double>(std::max<int64_t>(1, state.iterations()));
  state.counters["exporter_peak_rss_MiB"] = static_cast<double>(PeakRssKib(pid)) / 1024.0;
  kill(pid, SIGTERM);
  waitpid(pid, nullptr, 0);
}
BENCHMARK(BM_HttpScrape)->ArgName("gzip")->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
