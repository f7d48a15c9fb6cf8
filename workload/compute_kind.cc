// compute: spin kernels back to back on one stream, `depth` of them queued at any time so the
// device never waits for the host. The event recorded after each kernel tells when its slot in
// the queue is free again.
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "workload/exit_codes.h"
#include "workload/fault_kernel_ptx.h"
#include "workload/kinds.h"
#include "workload/session.h"
#include "workload/spin_kernel.h"
#include "workload/stop_signal.h"

namespace gpuslice::workload {
namespace {

Json Throughput(uint64_t kernels, double seconds, uint64_t kernel_us) {
  const double rate = seconds > 0 ? static_cast<double>(kernels) / seconds : 0;
  const double busy = seconds > 0 ? static_cast<double>(kernels) * static_cast<double>(kernel_us) * 1e-6 / seconds : 0;
  return Json{{"kernels_per_s", rate}, {"busy_fraction", busy}};
}

// --first-on-device: one kernel on that device, waited for, in its own primary context, which
// stays retained (in `first`) for the run. Session::Open makes --device current afterwards.
int LaunchOnceOn(int device, const CommonOptions& common, uint64_t kernel_us, std::optional<Session>* first) {
  CommonOptions options = common;
  options.device = device;
  options.ready_line = false;
  first->emplace("compute", options);
  if (const int rc = (*first)->Open(); rc != kExitOk) return rc;
  SpinKernel kernel(**first);
  if (!kernel.Load() || !kernel.Launch(nullptr, kernel_us * 1000) ||
      !DRIVER_CALL(**first, cuStreamSynchronize, nullptr))
    return kExitDriverFailed;
  (*first)->Emit("first_device_done", Json{{"device", device}});
  return kExitOk;
}

// --threads: every thread but the main one launches on a stream of its own, in the primary
// context, until the main loop ends (or, with --kernels, its own count); returns how many it
// completed, or nothing when a driver call failed.
std::optional<uint64_t> RunExtraLauncher(const Session& s, const SpinKernel& kernel, const ComputeOptions& options,
                                         const std::atomic<bool>& done) {
  CUcontext context = nullptr;
  if (!DRIVER_CALL(s, cuDevicePrimaryCtxRetain, &context, s.device())) return std::nullopt;
  std::optional<uint64_t> result;
  CUstream stream = nullptr;
  std::vector<CUevent> slots(static_cast<size_t>(options.depth), nullptr);
  if (DRIVER_CALL(s, cuCtxSetCurrent, context) && DRIVER_CALL(s, cuStreamCreate, &stream, CU_STREAM_NON_BLOCKING)) {
    bool ok = true;
    for (CUevent& event : slots) ok = ok && DRIVER_CALL(s, cuEventCreate, &event, CU_EVENT_DISABLE_TIMING);
    uint64_t launched = 0;
    while (ok && !done.load() && !StopRequested() && (!options.kernels || launched < *options.kernels)) {
      CUevent& slot = slots[launched % slots.size()];
      if (launched >= slots.size()) ok = DRIVER_CALL(s, cuEventSynchronize, slot);
      ok = ok && kernel.Launch(stream, options.kernel_us * 1000) && DRIVER_CALL(s, cuEventRecord, slot, stream);
      if (ok) ++launched;
    }
    if (ok && DRIVER_CALL(s, cuStreamSynchronize, stream)) result = launched;
    for (CUevent event : slots) {
      if (event) DRIVER_CALL(s, cuEventDestroy, event);
    }
    DRIVER_CALL(s, cuStreamDestroy, stream);
  }
  DRIVER_CALL(s, cuDevicePrimaryCtxRelease, s.device());
  return result;
}

int RunComputeLoop(const CommonOptions& common, const ComputeOptions& options) {
  std::optional<Session> first;
  if (options.first_on_device) {
    if (const int rc = LaunchOnceOn(*options.first_on_device, common, options.kernel_us, &first); rc != kExitOk)
      return rc;
  }
  Session s("compute", common);
  if (const int rc = s.Open(); rc != kExitOk) return rc;
  SpinKernel kernel(s);
  if (!kernel.Load(options.width)) return kExitDriverFailed;
  CUstream stream = nullptr;
  if (!DRIVER_CALL(s, cuStreamCreate, &stream, CU_STREAM_NON_BLOCKING)) return kExitDriverFailed;
  std::vector<CUevent> slots(static_cast<size_t>(options.depth), nullptr);
  for (CUevent& event : slots) {
    if (!DRIVER_CALL(s, cuEventCreate, &event, CU_EVENT_DISABLE_TIMING)) return kExitDriverFailed;
  }

  // --fault-after: the faulting kernel, loaded up front so that its launch is one call.
  CUmodule fault_module = nullptr;
  CUfunction fault = nullptr;
  if (options.fault_after_s && (!DRIVER_CALL(s, cuModuleLoadData, &fault_module, kFaultKernelPtx) ||
                                !DRIVER_CALL(s, cuModuleGetFunction, &fault, fault_module, kFaultKernelName)))
    return kExitDriverFailed;

  std::atomic<bool> done{false};
  std::mutex extra_mutex;
  uint64_t extra_completed = 0;
  bool extra_failed = false;
  std::vector<std::thread> extra_launchers;
  for (int t = 1; t < options.threads; ++t) {
    extra_launchers.emplace_back([&] {
      const std::optional<uint64_t> completed = RunExtraLauncher(s, kernel, options, done);
      std::lock_guard<std::mutex> lock(extra_mutex);
      extra_completed += completed.value_or(0);
      extra_failed = extra_failed || !completed;
    });
  }
  // Whatever way the main loop ends, the other launchers stop and are joined.
  struct JoinAtEnd {
    std::atomic<bool>& done;
    std::vector<std::thread>& threads;
    ~JoinAtEnd() {
      done.store(true);
      for (std::thread& t : threads) t.join();
    }
  } join_at_end{done, extra_launchers};

  const uint64_t kernel_ns = options.kernel_us * 1000;
  const auto start = Clock::now();
  const auto deadline = start + Seconds(options.duration_s);
  const auto interval = Seconds(common.report_interval_s);
  auto window_start = start;
  uint64_t window_first = 0;
  uint64_t launched = 0, completed = 0;
  const char* stopped_by = options.kernels ? "kernels" : "duration";

  while (true) {
    if (StopRequested()) {
      stopped_by = "signal";
      break;
    }
    if (options.kernels ? launched >= *options.kernels : Clock::now() >= deadline) break;
    if (fault != nullptr && Clock::now() >= start + Seconds(*options.fault_after_s)) {
      s.Emit("fault", Json{{"elapsed_s", SecondsBetween(start, Clock::now())}, {"kernels", completed}});
      if (!DRIVER_CALL(s, cuLaunchKernel, fault, 1, 1, 1, 1, 1, 1, 0, stream, nullptr, nullptr))
        return kExitDriverFailed;
      fault = nullptr;  // once; the next synchronisation reports it
    }
    CUevent& slot = slots[launched % slots.size()];
    if (launched >= slots.size()) {  // the kernel that last used this slot must be done
      if (!DRIVER_CALL(s, cuEventSynchronize, slot)) return kExitDriverFailed;
      ++completed;
    }
    if (!kernel.Launch(stream, kernel_ns)) return kExitDriverFailed;
    if (!DRIVER_CALL(s, cuEventRecord, slot, stream)) return kExitDriverFailed;
    ++launched;

    if (common.report_interval_s > 0) {
      const auto now = Clock::now();
      if (now - window_start >= interval) {
        Json progress = {{"elapsed_s", SecondsBetween(start, now)},
                         {"kernels", completed},
                         {"blocks", kernel.blocks()},
                         {"window_s", SecondsBetween(window_start, now)},
                         {"window_kernels", completed - window_first}};
        progress.update(Throughput(completed - window_first, SecondsBetween(window_start, now), options.kernel_us));
        s.Emit("progress", progress);
        window_start = now;
        window_first = completed;
      }
    }
  }
  // Every launched kernel is counted: wait for the ones still queued, and for the other launchers
  // (with --kernels, each launches its own count).
  if (!DRIVER_CALL(s, cuStreamSynchronize, stream)) return kExitDriverFailed;
  if (!options.kernels) done.store(true);
  for (std::thread& t : extra_launchers) t.join();
  extra_launchers.clear();
  if (extra_failed) return kExitDriverFailed;
  completed = launched + extra_completed;
  const double elapsed = SecondsBetween(start, Clock::now());

  for (CUevent event : slots) DRIVER_CALL(s, cuEventDestroy, event);
  DRIVER_CALL(s, cuStreamDestroy, stream);
  if (fault_module != nullptr) DRIVER_CALL(s, cuModuleUnload, fault_module);

  Json result = {{"device", common.device}, {"kernel_us", options.kernel_us}, {"blocks", kernel.blocks()},
                 {"depth", options.depth},  {"threads", options.threads},     {"kernels", completed},
                 {"elapsed_s", elapsed}};
  result.update(Throughput(completed, elapsed, options.kernel_us));
  result["stopped_by"] = stopped_by;
  s.Emit("result", result);
  return kExitOk;
}

}  // namespace

int RunCompute(const CommonOptions& common, const ComputeOptions& options) {
  if (!options.exit_after_s) return RunComputeLoop(common, options);
  // The main thread leaves by exit() while the launching thread runs on: the process's exit
  // handlers (a preloaded library's included) run beside a thread that may be inside a launch.
  std::mutex mutex;
  std::condition_variable finished;
  std::optional<int> rc;
  std::thread launcher([&] {
    const int result = RunComputeLoop(common, options);
    std::lock_guard<std::mutex> lock(mutex);
    rc = result;
    finished.notify_all();
  });
  std::unique_lock<std::mutex> lock(mutex);
  if (finished.wait_for(lock, Seconds(*options.exit_after_s), [&] { return rc.has_value(); })) {
    lock.unlock();
    launcher.join();
    return *rc;
  }
  std::fprintf(stdout, "{\"event\":\"exiting\",\"kind\":\"compute\"}\n");
  std::fflush(stdout);
  std::exit(kExitOk);  // the launcher is neither joined nor stopped: it is what the exit runs beside
}

}  // namespace gpuslice::workload
