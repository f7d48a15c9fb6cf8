// steps: a step of many short kernels launched back to back on one stream, then a
// synchronisation — an LLM decode step, or a launch-bound service's burst. The host's cost per
// launch decides how fast such a tenant goes: this is the shape on which a sharing layer's own
// driver calls show. With --graph the step is captured once into a CUDA graph and each step is
// one graph launch, as inference servers do to save those launch costs.
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "workload/exit_codes.h"
#include "workload/kinds.h"
#include "workload/percentiles.h"
#include "workload/session.h"
#include "workload/spin_kernel.h"
#include "workload/stop_signal.h"

namespace gpuslice::workload {
namespace {

double Us(double us) { return std::round(us * 1000) / 1000; }

// A step as a graph: its kernels captured from the stream once, instantiated.
struct StepGraph {
  const Session& s;
  CUgraph graph = nullptr;
  CUgraphExec exec = nullptr;
  ~StepGraph() {
    if (exec) DRIVER_CALL(s, cuGraphExecDestroy, exec);
    if (graph) DRIVER_CALL(s, cuGraphDestroy, graph);
  }
};

}  // namespace

int RunSteps(const CommonOptions& common, const StepsOptions& options) {
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
  Session s("steps", common);
  if (const int rc = s.Open(); rc != kExitOk) return rc;
  SpinKernel kernel(s);
  if (!kernel.Load()) return kExitDriverFailed;
  CUstream stream = nullptr;
  if (!DRIVER_CALL(s, cuStreamCreate, &stream, CU_STREAM_NON_BLOCKING)) return kExitDriverFailed;

  std::mt19937_64 draw(options.seed);
  std::uniform_int_distribution<uint64_t> length(options.kernel_us_min, options.kernel_us_max);
  std::vector<uint64_t> kernel_ns(static_cast<size_t>(options.kernels_per_step));
  double work_us = 0;
  for (uint64_t& ns : kernel_ns) {
    ns = length(draw) * 1000;
    work_us += static_cast<double>(ns) / 1000;
  }
  const auto launch_kernels = [&] {
    for (uint64_t ns : kernel_ns) {
      if (!kernel.Launch(stream, ns)) return false;
    }
    return true;
  };
  StepGraph graph{s};
  if (options.graph && (!DRIVER_CALL(s, cuStreamBeginCapture, stream, CU_STREAM_CAPTURE_MODE_RELAXED) ||
                        !launch_kernels() || !DRIVER_CALL(s, cuStreamEndCapture, stream, &graph.graph) ||
                        !DRIVER_CALL(s, cuGraphInstantiateWithFlags, &graph.exec, graph.graph, 0)))
    return kExitDriverFailed;
  const auto step = [&] {
    const bool launched = options.graph ? DRIVER_CALL(s, cuGraphLaunch, graph.exec, stream) : launch_kernels();
    return launched && DRIVER_CALL(s, cuStreamSynchronize, stream);
  };
  if (!step()) return kExitDriverFailed;  // unrecorded: the first launch loads the module on a GPU

  const auto period = Seconds(options.period_ms / 1000);
  const auto start = Clock::now();
  const auto end = start + Seconds(options.duration_s);
  std::vector<double> latencies_us;
  const char* stopped_by = options.steps ? "steps" : "duration";
  auto due = start;
  while (options.steps ? latencies_us.size() < *options.steps : Clock::now() < end) {
    if (StopRequested() || (options.period_ms > 0 && !SleepUntil(due))) {
      stopped_by = "signal";
      break;
    }
    const auto began = Clock::now();
    if (!step()) return kExitDriverFailed;
    latencies_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - began).count());
    due += period;
  }
  const double elapsed = SecondsBetween(start, Clock::now());
  DRIVER_CALL(s, cuStreamDestroy, stream);

  const auto steps = static_cast<double>(latencies_us.size());
  const double kernels = steps * options.kernels_per_step;
  const double launches = options.graph ? steps : kernels;
  Json result = {{"device", common.device},
                 {"kernels_per_step", options.kernels_per_step},
                 {"kernel_us_min", options.kernel_us_min},
                 {"kernel_us_max", options.kernel_us_max},
                 {"graph", options.graph},
                 {"steps", latencies_us.size()},
                 {"kernels", kernels},
                 {"launches", launches},
                 {"elapsed_s", elapsed},
                 {"steps_per_s", elapsed > 0 ? steps / elapsed : 0},
                 {"kernels_per_s", elapsed > 0 ? kernels / elapsed : 0},
                 {"launches_per_s", elapsed > 0 ? launches / elapsed : 0},
                 {"busy_fraction", elapsed > 0 ? steps * work_us * 1e-6 / elapsed : 0}};
  if (latencies_file != nullptr) {
    for (double us : latencies_us) std::fprintf(latencies_file, "%.3f\n", us);
    if (std::fflush(latencies_file) != 0) {
      ReportError("--latencies-file: cannot write " + options.latencies_file + ": " + std::strerror(errno));
      return kExitDriverFailed;
    }
  }
  const LatencySummary l = Summarize(std::move(latencies_us));
  result.update(Json{{"p50_us", Us(l.p50)}, {"p99_us", Us(l.p99)}, {"max_us", Us(l.max)}, {"mean_us", Us(l.mean)}});
  result["stopped_by"] = stopped_by;
  s.Emit("result", result);
  return kExitOk;
}

}  // namespace gpuslice::workload
