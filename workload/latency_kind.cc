// latency: a request every period, each a few short kernels on one stream followed by a
// synchronisation, the shape of an inference server's traffic. Latency runs from the first
// launch of a request to the return of its synchronisation. A request still running when the
// next period begins makes that period missed: requests are never queued up to catch up.
// Requests of the warm-up (--warmup-s) run like the others but are not recorded: the tail of a
// run says what a service sees in its steady state, and the warm-up's worst is reported apart
// (what a service sees on arriving beside work queued before it).
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "workload/exit_codes.h"
#include "workload/kinds.h"
#include "workload/percentiles.h"
#include "workload/session.h"
#include "workload/spin_kernel.h"
#include "workload/stop_signal.h"

namespace gpuslice::workload {
namespace {

// Whole nanoseconds: the clock's resolution, and short lines.
double Ns(double us) { return std::round(us * 1000) / 1000; }

Json Figures(const LatencySummary& l) {
  return Json{{"p50_us", Ns(l.p50)}, {"p90_us", Ns(l.p90)},   {"p99_us", Ns(l.p99)}, {"p999_us", Ns(l.p999)},
              {"max_us", Ns(l.max)}, {"mean_us", Ns(l.mean)}, {"min_us", Ns(l.min)}};
}

// Every latency, in the order measured, so that tenants of several processes can be merged and
// drawn as a distribution (the result line only has percentiles).
bool WriteLatencies(std::FILE* file, const std::vector<double>& latencies_us) {
  for (double us : latencies_us) std::fprintf(file, "%.3f\n", us);
  return std::fflush(file) == 0 && !std::ferror(file);
}

}  // namespace

int RunLatency(const CommonOptions& common, const LatencyOptions& options) {
  // Opened before the driver so that a bad path is a usage error, not a wasted run.
  std::FILE* latencies_file = nullptr;
  if (!options.latencies_file.empty()) {
    latencies_file = std::fopen(options.latencies_file.c_str(), "w");
    if (latencies_file == nullptr) {
      ReportError("--latencies-file: cannot open " + options.latencies_file + ": " + std::strerror(errno));
      return kExitUsage;
    }
  }
  struct Closer {
    std::FILE* f;
    ~Closer() {
      if (f) std::fclose(f);
    }
  } closer{latencies_file};
  Session s("latency", common);
  if (const int rc = s.Open(); rc != kExitOk) return rc;
  SpinKernel kernel(s);
  if (!kernel.Load(options.width)) return kExitDriverFailed;
  CUstream stream = nullptr;
  if (!DRIVER_CALL(s, cuStreamCreate, &stream, CU_STREAM_NON_BLOCKING)) return kExitDriverFailed;

  const uint64_t kernel_ns = options.kernel_us * 1000;
  auto request = [&] {
    for (int i = 0; i < options.kernels_per_request; ++i) {
      if (!kernel.Launch(stream, kernel_ns)) return false;
      if (options.dependent && i + 1 < options.kernels_per_request) {
        if (!DRIVER_CALL(s, cuStreamSynchronize, stream)) return false;
        // A signal ends the sleep early: the request goes on, and the loop sees the signal after it.
        if (options.host_gap_us) (void)SleepUntil(Clock::now() + std::chrono::microseconds(options.host_gap_us));
      }
    }
    return DRIVER_CALL(s, cuStreamSynchronize, stream);
  };
  // One unrecorded request first: on a real GPU the first launch pays for loading the module.
  if (!request()) return kExitDriverFailed;

  const auto period = Seconds(options.period_ms / 1000);
  const auto start = Clock::now();
  const auto warmup_end = start + Seconds(options.warmup_s);
  const auto end = warmup_end + Seconds(options.duration_s);
  const auto interval = Seconds(common.report_interval_s);
  auto window_start = start;
  std::vector<double> latencies_us, window_us;
  uint64_t missed = 0;
  uint64_t warmup_requests = 1;  // the unrecorded first request, before the start
  double warmup_max_us = 0;
  const char* stopped_by = options.requests ? "requests" : "duration";
  auto due = start;

  while (true) {
    if (options.requests ? latencies_us.size() >= *options.requests : due >= end) break;
    if (!SleepUntil(due)) {
      stopped_by = "signal";
      break;
    }
    const auto submitted = Clock::now();
    if (!request()) {
      // A broken context (a fault, ours or, under MPS, another client's) ends the run: the
      // latencies measured until then are still the record of it.
      if (latencies_file != nullptr) WriteLatencies(latencies_file, latencies_us);
      return kExitDriverFailed;
    }
    const auto done = Clock::now();
    const double us = std::chrono::duration<double, std::micro>(done - submitted).count();
    if (submitted < warmup_end) {
      ++warmup_requests;
      warmup_max_us = std::max(warmup_max_us, us);
    } else {
      latencies_us.push_back(us);
      window_us.push_back(us);
    }
    due += period;
    if (due < done) {  // the boundaries that passed while this request ran
      const auto behind = (done - due + period - Clock::duration(1)) / period;
      missed += static_cast<uint64_t>(behind);
      due += behind * period;
    }

    if (common.report_interval_s > 0 && done - window_start >= interval) {
      Json progress = {{"elapsed_s", SecondsBetween(start, done)},
                       {"requests", latencies_us.size()},
                       {"missed_periods", missed},
                       {"window_requests", window_us.size()}};
      progress.update(Figures(Summarize(std::move(window_us))));
      s.Emit("progress", progress);
      window_us.clear();
      window_start = done;
    }
  }
  const double elapsed = SecondsBetween(start, Clock::now());
  DRIVER_CALL(s, cuStreamDestroy, stream);

  Json result = {{"device", common.device},
                 {"period_ms", options.period_ms},
                 {"kernels_per_request", options.kernels_per_request},
                 {"dependent", options.dependent},
                 {"host_gap_us", options.host_gap_us},
                 {"kernel_us", options.kernel_us},
                 {"blocks", kernel.blocks()},
                 {"requests", latencies_us.size()},
                 {"missed_periods", missed},
                 {"warmup_s", options.warmup_s},
                 {"warmup_requests", warmup_requests},
                 {"warmup_max_us", Ns(warmup_max_us)},
                 {"elapsed_s", elapsed}};
  if (latencies_file != nullptr && !WriteLatencies(latencies_file, latencies_us)) {
    ReportError("--latencies-file: cannot write " + options.latencies_file + ": " + std::strerror(errno));
    return kExitDriverFailed;
  }
  result.update(Figures(Summarize(std::move(latencies_us))));
  result["stopped_by"] = stopped_by;
  s.Emit("result", result);
  return kExitOk;
}

}  // namespace gpuslice::workload
