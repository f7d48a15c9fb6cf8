// gpuslice-exporter: serves the broker's per-tenant figures and NVML's device figures to
// Prometheus. It maps the broker's state file read-only at every scrape, so it starts before any
// tenant exists, never changes the state, and keeps serving while the file is missing or being
// re-created (gpuslice_segment_up says which). docs/observability.md lists the metrics.
#include <malloc.h>
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <utility>

#include <CLI/CLI.hpp>
#include <httplib.h>

#include "broker/broker.h"
#include "common/mutex.h"
#include "common/mutex_lock.h"
#include "common/pod_names.h"
#include "common/thread_annotations.h"
#include "common/version.h"
#include "exporter/gzip_body.h"
#include "exporter/listen_address.h"
#include "exporter/metrics_text.h"
#include "exporter/nvml_devices.h"

namespace {

constexpr int kExitOk = 0;
constexpr int kExitFailed = 1;  // cannot listen
constexpr int kExitUsage = 2;

constexpr char kFooter[] = R"help(Endpoints:
  /metrics  Prometheus text format: per GPU (label gpu, its UUID) and tenant (labels tenant,
            namespace, pod, container: the pod from the device plugin's pods.json, empty
            otherwise; the class on gpuslice_tenant_info) memory used and quota, compute
            request, limit, share and device time, the wait-for-grant histogram, refused
            allocations and bytes, grants, processes; per device NVML's memory,
            utilisation and processes. A tenant's counters read 0 in its first scrape.
            gpuslice_segment_up and gpuslice_nvml_up say whether each source answered.
            Gzip-compressed (zlib level 1) for clients whose Accept-Encoding allows gzip, as
            Prometheus's does; as it is for any other.
  /healthz  "ok" while the exporter serves (the state file may still be missing).
The state file is mapped read-only at every scrape: the exporter never reaps dead processes
or changes anything, and needs only read permission on it.
Exit status: 0 after SIGTERM or SIGINT; 1 when it cannot listen; 2 on usage errors.)help";

std::string DefaultStateDir() {
  const char* env = std::getenv("GPUSLICE_STATE_DIR");
  return env && *env ? env : "/run/gpuslice";
}

// Logs a source's failure once, and its recovery, rather than at every scrape.
class ChangeLog {
 public:
  explicit ChangeLog(const char* source) : source_(source) {}
  void Report(bool ok, const std::string& error) {
    gpuslice::MutexLock lock(&mutex_);
    if (ok == last_ok_ && (ok || error == last_error_)) return;
    if (ok) {
      std::fprintf(stderr, "gpuslice-exporter: %s: available again\n", source_);
    } else {
      std::fprintf(stderr, "gpuslice-exporter: %s: %s\n", source_, error.c_str());
    }
    last_ok_ = ok;
    last_error_ = error;
  }

 private:
  const char* source_;
  gpuslice::Mutex mutex_;
  bool last_ok_ GUARDED_BY(mutex_) = true;
  std::string last_error_ GUARDED_BY(mutex_);
};

}  // namespace

int main(int argc, char** argv) {
  using namespace gpuslice::exporter;
  CLI::App app("Prometheus exporter of gpuslice's per-tenant GPU figures on this node.", "gpuslice-exporter");
  app.set_version_flag("--version", "gpuslice-exporter " GPUSLICE_VERSION, "Print the version and exit");
  std::string listen = kDefaultListen;
  std::string state_dir = DefaultStateDir();
  app.add_option("--listen", listen, "Address to serve on: HOST:PORT, [IPV6]:PORT or :PORT (all interfaces)")
      ->type_name("ADDR")
      ->capture_default_str();
  app.add_option("--state-dir", state_dir, "State directory (default: $GPUSLICE_STATE_DIR, else /run/gpuslice)")
      ->type_name("DIR");
  app.footer(kFooter);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? kExitOk : kExitUsage;
  }
  const auto address = ParseListenAddress(listen);
  if (!address.ok()) {
    std::fprintf(stderr, "gpuslice-exporter: %s\n", address.message().c_str());
    return kExitUsage;
  }

  // SIGTERM and SIGINT are taken by one thread (sigwait), which stops the server.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  // A page is ~1 MB for 64 tenants on 8 GPUs, built and sent once or twice per scrape (the text,
  // its gzip). glibc serves blocks that large with mmap and unmaps them on free, so
  // every scrape faulted its megabytes in afresh: a third of the exporter's CPU (perf). Kept on
  // the heap and not trimmed, they are reused; the peak stays a few copies of one page.
  mallopt(M_MMAP_THRESHOLD, 64 << 20);
  mallopt(M_TRIM_THRESHOLD, 128 << 20);

  NvmlDevices nvml;
  ChangeLog segment_log("state file"), nvml_log("NVML");
  gpuslice::Mutex first_sight_mutex;  // guards first_sight: scrapes run on two threads
  FirstSight first_sight;
  httplib::Server server;
  server.new_task_queue = [] { return new httplib::ThreadPool(2); };
  // A response is written as headers and then a body: with Nagle's algorithm on, the body's last
  // partial segment waits for the ACK of the one before, which the scraper delays (up to 40 ms
  // on Linux). TCP_NODELAY sends it at once (bench/exporter_scrape_bench.cc, BM_HttpScrape).
  server.set_tcp_nodelay(true);
  server.Get("/metrics", [&](const httplib::Request& request, httplib::Response& response) {
    gpuslice::Result<gpuslice::broker::Snapshot> taken = gpuslice::broker::TakeReadOnlySnapshot(state_dir);
    const bool have_snapshot = taken.ok();
    segment_log.Report(have_snapshot, taken.message());
    gpuslice::broker::Snapshot snapshot = have_snapshot ? std::move(taken).value() : gpuslice::broker::Snapshot();
    const auto devices = nvml.Read();
    nvml_log.Report(devices.ok(), devices.message());
    std::set<std::string> first_seen;
    {
      gpuslice::MutexLock lock(&first_sight_mutex);
      if (have_snapshot) first_seen = first_sight.Update(snapshot);
      else first_sight.UpdateWithoutSnapshot();
    }
    const gpuslice::PodNames pods = gpuslice::ReadPodNames(state_dir);
    std::string body;
    RenderMetrics({have_snapshot ? &snapshot : nullptr, devices.ok() ? &*devices : nullptr, &pods, &first_seen}, &body);
    // Compressed here at level 1 when the client accepts gzip (Prometheus does), else sent as it
    // is. Either way through a content provider of known length: httplib would compress a body
    // of text again itself, at level 6 or with brotli (gzip_body.h), but sends such a provider's
    // bytes untouched.
    auto page = std::make_shared<std::string>();
    if (AcceptsGzip(request.get_header_value("Accept-Encoding")) && Gzip(body, kGzipLevel, page.get())) {
      response.set_header("Content-Encoding", "gzip");
    } else {
      *page = std::move(body);
    }
    response.set_header("Vary", "Accept-Encoding");
    response.set_content_provider(page->size(), "text/plain; version=0.0.4; charset=utf-8",
                                  [page](size_t offset, size_t length, httplib::DataSink& sink) {
                                    return sink.write(page->data() + offset, length);
                                  });
  });
  server.Get("/healthz",
             [](const httplib::Request&, httplib::Response& response) { response.set_content("ok\n", "text/plain"); });
  // SO_REUSEADDR only: httplib's default adds SO_REUSEPORT, with which a second exporter (or
  // anything else) on the same port binds too and steals half the scrapes instead of failing.
  server.set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  if (!server.bind_to_port(address->host.c_str(), address->port)) {
    const std::string why = WhyCannotListen(*address);
    std::fprintf(stderr, "gpuslice-exporter: cannot listen on %s: %s\n", listen.c_str(),
                 why.empty() ? "the server could not bind it" : why.c_str());
    return kExitFailed;
  }
  std::thread stopper([&] {
    int signal = 0;
    sigwait(&stop_signals, &signal);
    server.stop();
  });
  std::fprintf(stderr, "gpuslice-exporter: serving /metrics on %s (state directory %s)\n", listen.c_str(),
               state_dir.c_str());
  const bool served = server.listen_after_bind();
  if (stopper.joinable()) {
    if (served) {
      stopper.join();
    } else {
      stopper.detach();
    }
  }
  return served ? kExitOk : kExitFailed;
}
