// ShimState's launch routing: which GPU's compute gate (and this process's launch tracker on it) a
// launch goes through, and the contexts a gate's monitor synchronises (broker/compute_gate.h holds the
// shared-state side of the gate, shim/launch_tracker.h the process-local side).
#include "broker/sched_lock.h"
#include "broker/sched_terms.h"
#include "common/clock.h"
#include "common/mutex_lock.h"
#include "shim/compute_monitor.h"
#include "shim/current_context.h"
#include "shim/log.h"
#include "shim/real_driver.h"
#include "shim/shim_state.h"

namespace gpuslice::shim {

// At the ledger's opening: the tenant's request shows before its first launch. The allocation
// that opens the ledger waits at most 10 ms for the scheduler lock (SetShare, at the first
// launch, is the one that must succeed, and has its own bound).
void ShimState::PresetComputeShare(broker::LedgerId ledger) {
  constexpr uint64_t kPresetLockTimeoutNs = 10'000'000;
  broker::PresetShare(broker_.get(), ledger,
                      options_.compute_request_pct ? options_.compute_request_pct : broker::kDefaultRequestPct,
                      options_.compute_limit_pct, options_.compute_class, kPresetLockTimeoutNs);
}

LaunchTracker* ShimState::TrackerForDevice(CUdevice device) {
  if (device < 0 || device >= kMaxOrdinals) return nullptr;
  if (LaunchTracker* tracker = tracker_by_ordinal_[device].load(std::memory_order_acquire)) return tracker;
  const DriverResult<broker::LedgerId> ledger = LedgerForDevice(device);
  if (!ledger.ok()) return nullptr;
  // A share refused (another process of the tenant asked for another one; the scheduler lock
  // stuck) is said once and tried again at most once a second, not at every launch, and a retry
  // only tries the lock: the launch that retries must not wait out the lock's bound again.
  const uint64_t now = MonotonicNanos();
  const uint64_t retry_at = share_retry_at_ns_[device].load(std::memory_order_relaxed);
  if (now < retry_at) return nullptr;
  MutexLock lock(&ledger_mutex_);
  if (LaunchTracker* tracker = tracker_by_ordinal_[device].load()) return tracker;
  const std::optional<broker::ProcessSlot> own = broker_->slot();
  if (!own) return nullptr;  // unregistered (the process exits): launches are not gated
  auto gate = std::make_unique<broker::ComputeGate>(broker_.get(), *ledger, *own);
  const Status share =
      gate->SetShare(options_.compute_request_pct ? options_.compute_request_pct : broker::kDefaultRequestPct,
                     options_.compute_limit_pct, options_.compute_class,
                     retry_at != 0 ? 0 : broker::SchedLockTimeoutNs());
  if (!share.ok()) {
    if (share_retry_at_ns_[device].exchange(MonotonicNanos() + kShareRetryNs) == 0)
      LogError("%s", share.message().c_str());
    return nullptr;
  }
  NoteContext(gate.get(), CurrentContext::Get(Real()));  // the first launch's: what the monitor synchronises
  auto tracker = std::make_unique<LaunchTracker>(this, gate.get());
  LaunchTracker* raw = tracker.get();
  gates_[device] = std::move(gate);
  trackers_[device] = std::move(tracker);
  tracker_by_ordinal_[device].store(raw, std::memory_order_release);
  StartComputeMonitor(this);
  return raw;
}

// The launch's GPU is the device of its stream's context: the explicit stream's own, the current
// one's for the default streams. Neither is asked of the driver at a launch: the current context
// is mirrored per thread (shim/current_context.h), and what a thread found for its last few
// (context, stream) pairs is cached — so a process that launched on GPU 0 and then works on GPU 1
// (device_map="auto", a pipeline in one process, a probe of device 0 first) is gated on each GPU
// from its first launch there, at the cost of a few driver calls then. Destroying a context or a
// stream invalidates every thread's cache (a handle may come back for another device).
LaunchTracker* ShimState::TrackerForLaunch(CUstream stream, bool per_thread, LaunchTarget* target) {
  const RealDriver* real = Real();
  const CUcontext current = CurrentContext::Get(real);
  if (!current) return nullptr;  // the launch reports it
  const bool own_stream = stream != nullptr && stream != CU_STREAM_LEGACY && stream != CU_STREAM_PER_THREAD;
  const bool thread_stream = !own_stream && (per_thread || stream == CU_STREAM_PER_THREAD);
  const CUstream handle = own_stream ? stream : thread_stream ? CU_STREAM_PER_THREAD : CU_STREAM_LEGACY;
  struct Seen {
    CUcontext current = nullptr;
    CUstream handle = nullptr;
    CUcontext context = nullptr;  // the stream's
    LaunchTracker* tracker = nullptr;
  };
  struct Cache {
    const ShimState* state = nullptr;  // a forked child's threads must not use the parent's trackers
    uint64_t epoch = 0;
    uint32_t next = 0;
    Seen seen[4];
  };
  __attribute__((tls_model("initial-exec"))) thread_local Cache cache;  // preloaded: static TLS, no call
  const uint64_t epoch = contexts_epoch_.load(std::memory_order_acquire);
  if (cache.state == this && cache.epoch == epoch) {
    for (const Seen& s : cache.seen) {
      // sabotage-point: first-gpu-gates-all
      if (s.tracker && s.current == current && s.handle == handle) {
        *target = LaunchTarget{handle, s.context};
        return s.tracker;
      }
    }
  } else {
    cache = Cache{this, epoch, 0, {}};
  }
  CUcontext context = current;
  CUdevice device = -1;
  if (!own_stream) {
    if (real->cuCtxGetDevice(&device) != CUDA_SUCCESS) return nullptr;
  } else {
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
  if (tracker) {
    NoteContext(tracker->gate(), context);  // the monitor may have to synchronise what it runs
    cache.seen[cache.next++ % 4] = Seen{current, handle, context, tracker};
    *target = LaunchTarget{handle, context};
  }
  return tracker;
}

void ShimState::NoteContext(broker::ComputeGate* gate, CUcontext context) {
  if (!context) return;
  MutexLock lock(&contexts_mutex_);
  for (const auto& [g, c] : contexts_) {
    if (g == gate && c == context) return;
  }
  contexts_.emplace_back(gate, context);
}

void ShimState::SynchronizeGate(broker::ComputeGate* gate, std::vector<CUcontext>* synchronized) {
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
    if (real->cuCtxSetCurrent(context) != CUDA_SUCCESS) continue;
    CurrentContext::Set(context);  // the monitor's own mirror: its pollers query legacy streams
    if (real->cuCtxSynchronize() == CUDA_SUCCESS) synchronized->push_back(context);
  }
}

void ShimState::ForgetContexts(CUcontext context, CUdevice device) {
  contexts_epoch_.fetch_add(1, std::memory_order_acq_rel);  // every thread's cached launch device
  CurrentContext::ForgetEverywhere();                       // and its current context, which may be the one destroyed
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
