// Finding the compute gate of a launch, and the contexts a gate's monitor synchronises.
#include <unordered_map>

#include "shim/compute_monitor.h"
#include "shim/log.h"
#include "shim/real_driver.h"
#include "shim/shim_state.h"

namespace gpuslice::shim {

namespace {

broker::ComputeClass BrokerClass(ComputeClass compute_class) {
  switch (compute_class) {
    case ComputeClass::kLatency: return broker::ComputeClass::kLatency;
    case ComputeClass::kBackground: return broker::ComputeClass::kBackground;
    default: return broker::ComputeClass::kStandard;
  }
}

}  // namespace

LaunchTracker* ShimState::TrackerForDevice(CUdevice device) {
  if (device < 0 || device >= kMaxOrdinals) return nullptr;
  if (LaunchTracker* tracker = tracker_by_ordinal_[device].load(std::memory_order_acquire)) return tracker;
  int ledger = -1;
  if (LedgerForDevice(device, &ledger) != CUDA_SUCCESS) return nullptr;
  std::lock_guard<std::mutex> lock(ledger_mutex_);
  if (LaunchTracker* tracker = tracker_by_ordinal_[device].load()) return tracker;
  auto gate = std::make_unique<broker::ComputeGate>(broker_.get(), ledger);
  std::string error;
  if (!gate->SetShare(options_.compute_request_pct ? options_.compute_request_pct : broker::kDefaultRequestPct,
                      options_.compute_limit_pct, BrokerClass(options_.compute_class), &error)) {
    LogError("%s", error.c_str());
    return nullptr;
  }
  NoteContext(gate.get());  // the context of the first launch: what the monitor synchronises
  auto tracker = std::make_unique<LaunchTracker>(this, gate.get());
  LaunchTracker* raw = tracker.get();
  gates_[device] = std::move(gate);
  trackers_[device] = std::move(tracker);
  tracker_by_ordinal_[device].store(raw, std::memory_order_release);
  // One GPU: launches need no lookup at all. A second GPU turns the shortcut off for good.
  if (gate_count_.fetch_add(1) == 0) {
    single_tracker_.store(raw, std::memory_order_release);
  } else {
    single_tracker_.store(nullptr, std::memory_order_release);
  }
  StartComputeMonitor(this);
  return raw;
}

LaunchTracker* ShimState::TrackerForLaunch(CUstream stream) {
  if (LaunchTracker* tracker = single_tracker_.load(std::memory_order_acquire)) return tracker;
  const RealDriver* real = Real();
  CUdevice device = -1;
  if (stream == nullptr || stream == CU_STREAM_LEGACY || stream == CU_STREAM_PER_THREAD) {
    if (real->cuCtxGetDevice(&device) != CUDA_SUCCESS) return nullptr;  // the launch reports it
    return TrackerForDevice(device);
  }
  // Several GPUs: the stream's device, cached per thread (a driver call only the first time).
  thread_local std::unordered_map<CUstream, int> device_of_stream;
  if (auto it = device_of_stream.find(stream); it != device_of_stream.end()) return TrackerForDevice(it->second);
  CUcontext context = nullptr;
  if (!real->cuStreamGetCtx || real->cuStreamGetCtx(stream, &context) != CUDA_SUCCESS) return nullptr;
  if (real->cuCtxPushCurrent_v2(context) != CUDA_SUCCESS) return nullptr;
  real->cuCtxGetDevice(&device);
  CUcontext popped = nullptr;
  real->cuCtxPopCurrent_v2(&popped);
  device_of_stream[stream] = device;
  return TrackerForDevice(device);
}

void ShimState::NoteContext(broker::ComputeGate* gate) {
  CUcontext context = nullptr;
  if (Real()->cuCtxGetCurrent(&context) != CUDA_SUCCESS || !context) return;
  std::lock_guard<std::mutex> lock(contexts_mutex_);
  for (const auto& [g, c] : contexts_) {
    if (g == gate && c == context) return;
  }
  contexts_.emplace_back(gate, context);
}

void ShimState::SynchronizeGate(broker::ComputeGate* gate) {
  std::lock_guard<std::mutex> pause(sync_mutex_);  // no context is being destroyed meanwhile
  std::vector<CUcontext> contexts;
  {
    std::lock_guard<std::mutex> lock(contexts_mutex_);
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
  LaunchTracker* tracker = nullptr;
  if (!context) {
    if (device < 0 || device >= kMaxOrdinals) return;
    if (!(tracker = tracker_by_ordinal_[device].load())) return;
    tracker->ForgetContext(nullptr);
  } else {
    for (LaunchTracker* t : Trackers()) t->ForgetContext(context);
  }
  broker::ComputeGate* gate = tracker ? tracker->gate() : nullptr;
  std::lock_guard<std::mutex> lock(contexts_mutex_);
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
