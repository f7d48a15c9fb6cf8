// The simulated driver's per-process state: initialisation, the process's slot in the shared
// device state, contexts and the current-context stack, the handle registry and the table of
// device allocations. Every API file works through this.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_set>

#include "device_runner.h"
#include "handles.h"
#include "sim/mps_client.h"
#include "sim/sim_config.h"
#include "sim/sim_state.h"
#include "stream_executor.h"

namespace gpuslice::sim {

enum class AllocationKind { kDevice, kManaged, kPool, kVirtualMapping, kHost };

struct Allocation {
  CUdeviceptr base = 0;
  size_t size = 0;       // bytes the caller asked for (and may touch)
  uint64_t charged = 0;  // device bytes charged to the process (0: not device memory)
  int device = 0;
  AllocationKind kind = AllocationKind::kDevice;
  CUmemoryPool pool = nullptr;
  // The context that owns it (kDevice, kManaged, kHost): destroying the context frees it, as
  // the real driver does. nullptr for pool and virtual-memory ranges, which outlive contexts.
  const CUctx_st* context = nullptr;
};

class Driver {
 public:
  // cuInit. Idempotent; after fork() the child starts uninitialised, as with the real driver.
  static CUresult Initialize(unsigned int flags);
  // The driver, or nullptr before a successful cuInit in this process.
  static Driver* Get();

  SimState& state() { return *state_; }
  int slot() const { return slot_; }
  // CUDA ordinals are the units CUDA_VISIBLE_DEVICES leaves visible (sim/visible_units.h): a
  // whole device or one MIG instance each.
  int device_count() const { return unit_count_; }
  int unit(int ordinal) const { return units_[ordinal]; }
  const SimDeviceConfig& device_config(int ordinal) { return state_->device(units_[ordinal]).config; }
  bool is_mig(int ordinal) const { return units_[ordinal] >= kMaxDevices; }
  uint64_t default_kernel_ns() const { return default_kernel_ns_; }
  DeviceRunner& runner(int ordinal) { return *runners_[ordinal]; }

  // Handle registry: a handle is valid between Register and Unregister.
  void Register(const void* handle);
  void Unregister(const void* handle);
  bool IsRegistered(const void* handle);

  // Device memory: charges the device-wide capacity first, then maps host memory behind it.
  CUresult AllocateDeviceMemory(int device, size_t size, AllocationKind kind, CUmemoryPool pool, CUdeviceptr* out,
                                const CUctx_st* owner = nullptr);
  // Frees an allocation made by AllocateDeviceMemory (kind must match when given).
  CUresult FreeDeviceMemory(CUdeviceptr base, Allocation* freed = nullptr);
  // Charges / credits device bytes that are not a mapped allocation (contexts, arrays, VMM).
  CUresult ChargeDevice(int device, uint64_t bytes);
  void CreditDevice(int device, uint64_t bytes);
  // Records an address range as usable by copies (VMM mappings) / forgets it.
  void AddRange(const Allocation& allocation);
  bool RemoveRange(CUdeviceptr base, Allocation* removed);
  // The allocation containing [ptr, ptr+bytes), if any.
  bool FindRange(CUdeviceptr ptr, size_t bytes, Allocation* found);

  // The device's primary context (created on first retain).
  CUctx_st* PrimaryContext(int device);
  CUresult CreateContext(int device, unsigned int flags, bool primary, CUctx_st** out);
  // Destroys the context and frees everything it owns: its streams, its device, managed and
  // pinned host allocations and its arrays (the caller has synchronised it).
  CUresult DestroyContext(CUctx_st* ctx);
  CUstream_st* CreateStream(CUctx_st* ctx, unsigned int flags, int priority);
  void DestroyStream(CUstream_st* stream);
  // The calling thread's per-thread default stream in ctx.
  CUstream_st* PerThreadStream(CUctx_st* ctx);

  // The fatal error that broke `ctx`, or CUDA_SUCCESS. Sticky, as with the real driver: the
  // context's own kernel faulted, or (MPS) any client of its device faulted since it was made.
  CUresult ContextError(CUctx_st* ctx) {
    if (const int error = ctx->sticky_error->load(std::memory_order_relaxed)) return static_cast<CUresult>(error);
    if (!mps_faults_[ctx->device]) return CUDA_SUCCESS;
    return MpsFaultSeen(ctx);
  }
  // A kernel of `ctx` faulted (CUDA_ERROR_ILLEGAL_ADDRESS): the context is broken; under MPS the
  // fault is reported to every client of the device.
  void Fault(CUctx_st* ctx);

  // Process exit: give the device back and return this process's memory.
  void Shutdown();

 private:
  Driver() = default;
  std::unique_ptr<SimState> state_;
  int slot_ = -1;
  uint64_t default_kernel_ns_ = 0;
  MpsClientSettings mps_;  // CUDA_MPS_* of this process (applies where an MPS server runs)
  CUresult MpsFaultSeen(CUctx_st* ctx);
  std::atomic<uint32_t>* mps_faults_[kMaxDevices] = {};  // per ordinal: its MPS server's fault count
  int unit_count_ = 0;
  int units_[kMaxDevices] = {};
  std::unique_ptr<DeviceRunner> runners_[kMaxDevices];

  std::mutex mutex_;
  std::unordered_set<const void*> handles_;
  std::map<CUdeviceptr, Allocation> ranges_;
  CUctx_st* primary_[kMaxDevices] = {};
  int primary_refs_[kMaxDevices] = {};

  friend CUresult DevicePrimaryCtxRetain(CUcontext*, CUdevice);
  friend CUresult DevicePrimaryCtxRelease(CUdevice);
  friend CUresult DevicePrimaryCtxReset(CUdevice);
  friend CUresult DevicePrimaryCtxGetState(CUdevice, unsigned int*, int*);
};

// --- Prologue helpers for API functions ---

// CUDA_ERROR_NOT_INITIALIZED before cuInit.
CUresult RequireInit(Driver** driver);
// Also CUDA_ERROR_INVALID_CONTEXT when the thread has no current context.
CUresult RequireContext(Driver** driver, CUctx_st** ctx);
// CUDA_ERROR_INVALID_DEVICE for an ordinal that does not exist.
CUresult RequireDevice(Driver** driver, CUdevice device);
// Resolves 0 / CU_STREAM_LEGACY / CU_STREAM_PER_THREAD / a stream handle to a stream.
// `per_thread` is true for the _ptsz/_ptds entry points, where 0 means the per-thread stream.
CUresult ResolveStream(CUstream stream, bool per_thread, CUstream_st** out);

// Waits for all of the context's streams; a synchronisation point for memory pools.
CUresult SynchronizeContext(CUctx_st* ctx);

// The calling thread's context stack (top = current context).
CUctx_st* CurrentContextOrNull();
void SetCurrentContext(CUctx_st* ctx);
void PushContext(CUctx_st* ctx);
CUctx_st* PopContext();
void ForgetContextEverywhere(CUctx_st* ctx);
// Destroys every CUDA array and mipmapped array created in `ctx` (api_array.cc).
void DestroyArraysOfContext(Driver* driver, const CUctx_st* ctx);

// Bytes rounded up the way the simulator charges allocations.
inline uint64_t ChargedBytes(size_t size) { return (static_cast<uint64_t>(size) + 511) & ~uint64_t{511}; }

}  // namespace gpuslice::sim
