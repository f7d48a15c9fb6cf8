// The shim's per-process state, created at the first CUDA call: options, the broker and this
// process's registration in it, the ledger of each device it uses, and what each live
// allocation charged. A configuration or broker error makes initialisation fail closed: the
// error is printed once and every later call gets the same failure.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "broker/broker.h"
#include "broker/compute_gate.h"
#include "broker/scheduler.h"
#include "common/mutex.h"
#include "common/thread_annotations.h"
#include "shim/allocation_map.h"
#include "shim/app_events.h"
#include "shim/context_sync.h"
#include "shim/driver_api.h"
#include "shim/driver_result.h"
#include "shim/launch_tracker.h"
#include "shim/options.h"

namespace gpuslice::shim {

// The result a failed initialisation gives every intercepted call.
inline constexpr CUresult kFailClosed = CUDA_ERROR_NOT_PERMITTED;

class ShimState final : public ContextSync {
 public:
  // The state, initialising it on first use; nullptr when initialisation failed. Inline once set
  // up: every hook asks.
  static ShimState* Get() {
    if (ShimState* s = instance_.load(std::memory_order_acquire)) return s;
    return GetSlow();
  }
  // Set once initialised; cleared in a forked child and read at exit (shim/shim_state.cc). Use Get.
  static std::atomic<ShimState*> instance_;

  const ShimOptions& options() const { return options_; }
  broker::Broker& broker() { return *broker_; }
  AllocationMap& allocations() { return allocations_; }
  AllocationMap& arrays() { return arrays_; }
  AllocationMap& physical() { return physical_; }
  // What the application's recorded events stand for (shim/hooks_sync.cc).
  AppEvents& app_events() { return app_events_; }

  // The ledger of this tenant on the device with CUDA ordinal `device`; opened on first use.
  DriverResult<broker::LedgerId> LedgerForDevice(CUdevice device);
  // The ledger of the current context's device (the driver's error when there is none).
  DriverResult<broker::LedgerId> LedgerForCurrentContext();
  // The same, and the current context itself: what owns an allocation made now.
  DriverResult<broker::LedgerId> LedgerAndContext(CUcontext* context);
  // Stream-ordered memory is charged to the device it lives on (shim/memory_devices.cc): the
  // stream's device for cuMemAllocAsync, the pool's for cuMemAllocFromPoolAsync.
  DriverResult<broker::LedgerId> LedgerForStream(CUstream stream);
  // The device of `stream`'s context (stream 0, CU_STREAM_LEGACY and CU_STREAM_PER_THREAD: the
  // current context's), without a cache: a destroyed stream's handle may name another later.
  static CUresult DeviceOfStream(CUstream stream, CUdevice* device);
  DriverResult<broker::LedgerId> LedgerForPool(CUmemoryPool pool, CUstream stream);
  // Pools created by the application, with their device (cuMemPoolCreate / cuMemPoolDestroy).
  void NotePool(CUmemoryPool pool, CUdevice device);
  void ForgetPool(CUmemoryPool pool);

  // Context teardown (shim/hooks_context.cc): the charges of every allocation and array the
  // context owns, taken out before the driver destroys it, then credited — or put back if the
  // driver refused.
  struct ContextCharges {
    std::vector<uint64_t> allocation_keys, array_keys;
    std::vector<Charge> allocations, arrays;
  };
  ContextCharges TakeContextCharges(CUcontext context);
  void CreditContextCharges(const ContextCharges& charges);
  void RestoreContextCharges(const ContextCharges& charges);
  // Records a new allocation's charge; a stale entry under the same key is credited.
  void Record(AllocationMap& map, uint64_t key, Charge charge);
  // Returns a charge to its ledger (the memory was freed).
  void Credit(const Charge& charge);
  // The ledger for a GPU seen through NVML (by UUID). NotFound when the GPU's quota cannot be
  // known from NVML alone (per-ordinal limits and no CUDA process of the tenant on it); another
  // error when the ledger is refused (said once) or there is no memory to look it up.
  Result<broker::LedgerId> LedgerForUuid(const uint8_t (&uuid)[16], uint64_t device_total);
  Result<broker::LedgerId> LedgerForUuidOrThrow(const uint8_t (&uuid)[16], uint64_t device_total);

  // The compute gate (and this process's launch tracking) for launches on `stream` (`per_thread`:
  // through a _ptsz entry point, where stream 0 is the thread's own) (docs/scheduling.md); nullptr
  // when launches cannot be gated (no usable ledger). Sets `target` to the stream as the driver is
  // asked about it and its context. No driver call once the thread's current context and the
  // stream were seen (shim/current_context.h).
  LaunchTracker* TrackerForLaunch(CUstream stream, bool per_thread, LaunchTarget* target);
  LaunchTracker* TrackerForDevice(CUdevice device);
  // The contexts this process launched from on a gate's GPU: what its monitor synchronises when
  // it must confirm that work launched untracked has finished.
  void NoteContext(broker::ComputeGate* gate, CUcontext context);
  void SynchronizeGate(broker::ComputeGate* gate, std::vector<CUcontext>* synchronized) override;
  // Held around the application's context teardown (shim/hooks_context.cc): the driver forbids
  // using a context while it is destroyed, so the monitor does not synchronise meanwhile.
  Mutex& pause_mutex() override RETURN_CAPABILITY(sync_mutex_) { return sync_mutex_; }
  // The monitor stops synchronising `context` (nullptr: every context noted on `device`'s
  // GPU) and stops following its launches; a later gated launch from a live one notes it again.
  void ForgetContexts(CUcontext context, CUdevice device);
  // Every gate's tracker, for the monitor thread.
  std::vector<LaunchTracker*> Trackers();
  // Calls `visit` on every gate's tracker (without allocating).
  template <typename Visit>
  void ForEachTracker(Visit visit) {
    for (const auto& slot : tracker_by_ordinal_) {
      if (LaunchTracker* t = slot.load(std::memory_order_acquire)) visit(t);
    }
  }
  // Calls `visit` on every gate's tracker that tracks launches (without allocating: the
  // application's synchronisations ask, shim/hooks_sync.cc).
  template <typename Visit>
  void ForEachTrackingTracker(Visit visit) {
    for (const auto& slot : tracker_by_ordinal_) {
      LaunchTracker* t = slot.load(std::memory_order_acquire);
      if (t && t->tracking()) visit(t);
    }
  }
  // A stream the application destroyed: launches' per-thread routing caches start again.
  void ForgetStreams() { contexts_epoch_.fetch_add(1, std::memory_order_acq_rel); }

  // Orderly process exit: stop and join the compute monitor, leave every GPU's grant, return
  // every byte this process still has charged.
  void Shutdown();
  // In a forked child: forget the parent's registration and allocations.
  void ForgetAfterFork();

 private:
  ShimState() = default;
  static ShimState* GetSlow();
  static ShimState* Create();
  // At a GPU's first use: one warning line when the device holds memory this state directory
  // does not account for and the tenant's quota cannot be met (shim/device_warnings.h).
  void WarnOfUnaccountedMemory(CUdevice device, broker::LedgerId ledger, const std::string& gpu_uuid);
  // At a GPU's first use: records the tenant's compute request, limit and class there unless its
  // processes have (broker::PresetShare), so that they show before its first launch.
  void PresetComputeShare(broker::LedgerId ledger);

  ShimOptions options_;
  std::unique_ptr<broker::Broker> broker_;
  AllocationMap allocations_;  // device pointers
  AllocationMap arrays_;       // CUarray / CUmipmappedArray handles
  AllocationMap physical_;     // CUmemGenericAllocationHandle values
  AppEvents app_events_;
  // Opens each GPU's ledger and creates its gate once; the lock-free readers go through the
  // atomics below, published once the slot is set.
  Mutex ledger_mutex_;
  static constexpr int kMaxOrdinals = 64;
  std::atomic<int> ledger_by_ordinal_[kMaxOrdinals] = {};  // ledger + 1; 0 = not opened yet
  // Compute gates, one per device ordinal used, each created at the first launch on its GPU.
  std::unique_ptr<broker::ComputeGate> gates_[kMaxOrdinals] GUARDED_BY(ledger_mutex_);
  std::unique_ptr<LaunchTracker> trackers_[kMaxOrdinals] GUARDED_BY(ledger_mutex_);
  std::atomic<LaunchTracker*> tracker_by_ordinal_[kMaxOrdinals] = {};
  // When a refused compute share may be asked for again (0: never refused).
  static constexpr uint64_t kShareRetryNs = 1'000'000'000;
  std::atomic<uint64_t> share_retry_at_ns_[kMaxOrdinals] = {};
  // Bumped when a context is destroyed: launches' per-thread device caches start again.
  std::atomic<uint64_t> contexts_epoch_{0};
  Mutex contexts_mutex_;
  std::vector<std::pair<broker::ComputeGate*, CUcontext>> contexts_ GUARDED_BY(contexts_mutex_);
  // Held while the monitor synchronises, and around context teardown; guards no member, only
  // the driver's contexts.
  Mutex sync_mutex_;
  Mutex pools_mutex_;
  // Created pools, and default pools seen.
  std::vector<std::pair<CUmemoryPool, CUdevice>> pools_ GUARDED_BY(pools_mutex_);
};

// Bytes charged for a request of `size` bytes: rounded up to 512, as the driver aligns. A size
// that cannot be rounded saturates (no quota admits it) rather than wrapping to a small charge.
inline uint64_t ChargeFor(uint64_t size) {
  return size > UINT64_MAX - 511 ? UINT64_MAX : (size + 511) & ~uint64_t{511};
}

}  // namespace gpuslice::shim
