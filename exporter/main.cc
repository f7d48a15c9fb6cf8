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

#include "broker/snapshot.h"
#include "common/exit_codes.h"
#include "common/mutex.h"
#include "common/mutex_lock.h"
#include "common/pod_names.h"
#include "common/thread_annotations.h"
#include "common/version.h"
#include "exporter/gzip_body.h"
#include "exporter/http_server.h"
#include "exporter/listen_address.h"
#include "exporter/metrics_text.h"
#include "gpu/nvml_devices.h"

namespace {

using gpuslice::kExitFailure;  // cannot listen, or the state directory is refused
using gpuslice::kExitOk;
using gpuslice::kExitUsage;

constexpr char kFooter[] = R"help(Endpoints:
  /metrics  Prometheus text format: per GPU (label gpu, its UUID) and tenant (labels tenant,
            namespace, pod, container: the pod from the device plugin's pods file
            (--pods-file), empty otherwise; the class on gpuslice_tenant_info) memory used and quota, compute
            request, limit, share and device time, the wait-for-grant histogram, refused
            allocations and bytes, grants, processes; per device NVML's memory,
            utilisation and processes. A tenant's counters read 0 in its first scrape.
            gpuslice_segment_up and gpuslice_nvml_up say whether each source answered.
            Gzip-compressed (zlib level 1) for clients whose Accept-Encoding allows gzip, as
            Prometheus's does; as it is for any other.
  /healthz  "ok" while the exporter serves (the state file may still be missing).
The state file is mapped read-only at every scrape: the exporter never reaps dead processes
or changes anything, and needs only read permission on it. The pods file is taken only as the
plugin writes it (a regular file of at most 1 MiB, not a link, owned by root or this user,
written by no one else); anything else names no pod, logged once. A client has 10 s and 8 KiB
for its request head; slow clients cannot hold up the others or a SIGTERM.
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
  std::string pods_file = gpuslice::kDefaultPodsFile;
  app.add_option("--listen", listen, "Address to serve on: HOST:PORT, [IPV6]:PORT or :PORT (all interfaces)")
      ->type_name("ADDR")
      ->capture_default_str();
  app.add_option("--state-dir", state_dir, "State directory (default: $GPUSLICE_STATE_DIR, else /run/gpuslice)")
      ->type_name("DIR");
  app.add_option("--pods-file", pods_file, "The device plugin's map of tenants to pods")
      ->type_name("FILE")
      ->capture_default_str();
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

  gpuslice::gpu::NvmlDevices nvml;
  ChangeLog segment_log("state file"), nvml_log("NVML"), pods_log("pods file");
  gpuslice::Mutex first_sight_mutex;  // guards first_sight: scrapes run on several workers
  FirstSight first_sight;
  HttpServer server;
  server.Route(
      "/metrics",
      [&](const RequestHead& request) {
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
        const gpuslice::PodNamesRead pods = gpuslice::ReadPodNames(pods_file);
        pods_log.Report(pods.problem.empty(), pods.problem);
        std::string body;
        RenderMetrics({have_snapshot ? &snapshot : nullptr, devices.ok() ? &*devices : nullptr, &pods.names,
                       &first_seen},
                      &body);
        // Compressed here at level 1 when the client accepts gzip (Prometheus does), else sent as
        // it is (gzip_body.h).
        HttpResponse response;
        response.content_type = "text/plain; version=0.0.4; charset=utf-8";
        response.headers.push_back({"Vary", "Accept-Encoding"});
        if (AcceptsGzip(request.accept_encoding) && Gzip(body, kGzipLevel, &response.body)) {
          response.headers.push_back({"Content-Encoding", "gzip"});
        } else {
          response.body = std::move(body);
        }
        return response;
      },
      /*slow=*/true);
  server.Route(
      "/healthz",
      [](const RequestHead&) {
        HttpResponse response;
        response.body = "ok\n";
        return response;
      },
      /*slow=*/false);
  if (const gpuslice::Status bound = server.Bind(*address); !bound.ok()) {
    const std::string why = WhyCannotListen(*address);
    std::fprintf(stderr, "gpuslice-exporter: cannot listen on %s: %s\n", listen.c_str(),
                 why.empty() ? bound.message().c_str() : why.c_str());
    return kExitFailure;
  }
  std::thread stopper([&] {
    int signal = 0;
    sigwait(&stop_signals, &signal);
    server.Stop();
  });
  std::fprintf(stderr, "gpuslice-exporter: serving /metrics on %s (state directory %s, pods file %s)\n", listen.c_str(),
               state_dir.c_str(), pods_file.c_str());
  if (const gpuslice::Status served = server.Serve(); !served.ok()) {
    std::fprintf(stderr, "gpuslice-exporter: %s\n", served.message().c_str());
    stopper.detach();  // still waiting for a signal that will not come
    return kExitFailure;
  }
  stopper.join();
  return kExitOk;
}
