// ShimState's launch routing: which GPU's compute gate (and this process's launch tracker on it) a
// launch goes through, and the contexts a gate's monitor synchronises (broker/scheduler.h holds the
// shared-state side of the gate, shim/launch_tracker.h the process-local side).
#include "common/clock.h"
#include "common/mutex_lock.h"
#include "shim/compute_monitor.h"
#include "shim/log.h"
#include "shim/real_driver.h"
#include "shim/shim_state.h"

namespace gpuslice::shim {

// At the ledger's opening: the tenant's request shows before its first launch. The allocation
// that opens the ledger waits at most 10 ms for the scheduler lock (SetShare, at the first
// launch, is the one that must succeed, and has its own bound).
void ShimState::PresetComputeShare(int ledger) {
  constexpr uint64_t kPresetLockTimeoutNs = 10'000'000;
  broker::PresetShare(broker_.get(), ledger,
                      options_.compute_request_pct ? options_.compute_request_pct : broker::kDefaultRequestPct,
                      options_.compute_limit_pct, options_.compute_class, kPresetLockTimeoutNs);
}

LaunchTracker* ShimState::TrackerForDevice(CUdevice device) {
  if (device < 0 || device >= kMaxOrdinals) return nullptr;
  if (LaunchTracker* tracker = tracker_by_ordinal_[device].load(std::memory_order_acquire)) return tracker;
  int ledger = -1;
  if (LedgerForDevice(device, &ledger) != CUDA_SUCCESS) return nullptr;
  // A share refused (another process of the tenant asked for another one; the scheduler lock
  // stuck) is said once and tried again at most once a second, not at every launch, and a retry
  // only tries the lock: the launch that retries must not wait out the lock's bound again.
  const uint64_t now = MonotonicNanos();
  const uint64_t retry_at = share_retry_at_ns_[device].load(std::memory_order_relaxed);
  if (now < retry_at) return nullptr;
  MutexLock lock(&ledger_mutex_);
  if (LaunchTracker* tracker = tracker_by_ordinal_[device].load()) return tracker;
  const auto id = broker::LedgerId::From(ledger);
  if (!id) return nullptr;  // OpenLedger gives only valid ledgers
  auto gate = std::make_unique<broker::ComputeGate>(broker_.get(), *id);
  const Status share =
      gate->SetShare(options_.compute_request_pct ? options_.compute_request_pct : broker::kDefaultRequestPct,
                     options_.compute_limit_pct, options_.compute_class,
                     retry_at != 0 ? 0 : broker::SchedLockTimeoutNs());
  if (!share.ok()) {
    if (share_retry_at_ns_[device].exchange(MonotonicNanos() + kShareRetryNs) == 0)
      LogError("%s", share.message().c_str());
    return nullptr;
  }
  NoteContext(gate.get());  // the context of the first launch: what the monitor synchronises
  auto tracker = std::make_unique<LaunchTracker>(this, gate.get());
  LaunchTracker* raw = tracker.get();
  gates_[device] = std::move(gate);
  trackers_[device] = std::move(tracker);
  tracker_by_ordinal_[device].store(raw, std::memory_order_release);
  StartComputeMonitor(this);
  return raw;
}

// The launch's GPU is the device of the context it is launched in: the stream's for an explicit
// stream, the current one's otherwise. It is asked of the driver on every launch (the current
// context is a thread-local read in the driver), and the answer is cached per thread only for
// the context and stream it was found for: a process that launched on GPU 0 and then works on
// GPU 1 (device_map="auto", a pipeline in one process, a probe of device 0 first) is gated on
// each GPU from its first launch there. A context's destruction invalidates every thread's cache
// (its handle may come back for another device).
LaunchTracker* ShimState::TrackerForLaunch(CUstream stream, CUcontext* current_out) {
  const RealDriver* real = Real();
  CUcontext current = nullptr;
  if (real->cuCtxGetCurrent(&current) != CUDA_SUCCESS || !current) return nullptr;  // the launch reports it
  *current_out = current;
  const bool own_stream = stream != nullptr && stream != CU_STREAM_LEGACY && stream != CU_STREAM_PER_THREAD;
  struct LastLaunch {
    const ShimState* state = nullptr;  // a forked child's threads must not use the parent's trackers
    uint64_t epoch = 0;
    CUcontext context = nullptr;
    CUstream stream = nullptr;
    LaunchTracker* tracker = nullptr;
  };
  __attribute__((tls_model("initial-exec"))) thread_local LastLaunch last;  // preloaded: static TLS, no call
  const uint64_t epoch = contexts_epoch_.load(std::memory_order_acquire);
  const CUstream key = own_stream ? stream : nullptr;
  if (last.state == this && last.epoch == epoch && last.context == current && last.stream == key) return last.tracker;
  CUdevice device = -1;
  if (!own_stream) {
    if (real->cuCtxGetDevice(&device) != CUDA_SUCCESS) return nullptr;
  } else {
    CUcontext context = nullptr;
    if (!real->cuStreamGetCtx || real->cuStreamGetCtx(stream, &context) != CUDA_SUCCESS) return nullptr;
    if (context == current) {
      if (real->cuCtxGetDevice(&device) != CUDA_SUCCESS) return nullptr;
    } else {
      if (real->cuCtxPushCurrent_v2(context) != CUDA_SUCCESS) return nullptr;
      const CUresult rc = real->cuCtxGetDevice(&device);
      CUcontext popped = nullptr;
      real->cuCtxPopCurrent_v2(&popped);
      if (rc != CUDA_SUCCESS) return nullptr;
    }
  }
  LaunchTracker* tracker = TrackerForDevice(device);
  if (tracker) last = LastLaunch{this, epoch, current, key, tracker};
  return tracker;
}

void ShimState::NoteContext(broker::ComputeGate* gate) {
  CUcontext context = nullptr;
  if (Real()->cuCtxGetCurrent(&context) != CUDA_SUCCESS || !context) return;
  MutexLock lock(&contexts_mutex_);
  for (const auto& [g, c] : contexts_) {
    if (g == gate && c == context) return;
  }
  contexts_.emplace_back(gate, context);
}

void ShimState::SynchronizeGate(broker::ComputeGate* gate) {
  MutexLock pause(&sync_mutex_);  // no context is being destroyed meanwhile
  std::vector<CUcontext> contexts;
  {
    MutexLock lock(&contexts_mutex_);
    for (const auto& [g, c] : contexts_) {
      if (g == gate) contexts.push_back(c);
    }
  }
  const RealDriver* real = Real();
  for (CUcontext context : contexts) {
    // On the monitor thread: make the context current there, then wait for all its work.
    if (real->cuCtxSetCurrent(context) == CUDA_SUCCESS) real->cuCtxSynchronize();
  }
}

void ShimState::ForgetContexts(CUcontext context, CUdevice device) {
  contexts_epoch_.fetch_add(1, std::memory_order_acq_rel);  // every thread's cached launch device
  LaunchTracker* tracker = nullptr;
  if (!context) {
    if (device < 0 || device >= kMaxOrdinals) return;
    if (!(tracker = tracker_by_ordinal_[device].load())) return;
    tracker->ForgetContext(nullptr);
  } else {
    for (LaunchTracker* t : Trackers()) t->ForgetContext(context);
  }
  broker::ComputeGate* gate = tracker ? tracker->gate() : nullptr;
  MutexLock lock(&contexts_mutex_);
  std::erase_if(contexts_, [&](const auto& noted) { return context ? noted.second == context : noted.first == gate; });
}

std::vector<LaunchTracker*> ShimState::Trackers() {
  std::vector<LaunchTracker*> trackers;
  for (const auto& tracker : tracker_by_ordinal_) {
    if (LaunchTracker* t = tracker.load()) trackers.push_back(t);
  }
  return trackers;
}

}  // namespace gpuslice::shim
