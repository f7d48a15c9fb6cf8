// What the application reads about memory matches its slice: total = its limit, free = what it
// could still allocate — the rest of its request, or what it may borrow — never more than the
// device really has free.
#include <algorithm>
#include <atomic>

#include "broker/uuid.h"
#include "common/clock.h"
#include "shim/driver_api.h"
#include "shim/hook_entry.h"

namespace gpuslice::shim {
namespace {

// Applications poll free memory to size their work: have the figure reflect dead processes'
// memory within a fraction of a second, without reaping on every call.
void ReapNowAndThen(ShimState* state) {
  static std::atomic<uint64_t> last_reap_ns{0};
  const uint64_t now = MonotonicNanos();
  uint64_t last = last_reap_ns.load(std::memory_order_relaxed);
  if (now - last < 100'000'000ULL) return;
  // sabotage-point: reclaim-on-memory-query-off
  if (last_reap_ns.compare_exchange_strong(last, now)) state->broker().ReapDeadProcesses();
}

// Narrows (free, total) to the tenant's slice on `ledger`.
template <typename Bytes>
void Narrow(ShimState* state, broker::LedgerId ledger, Bytes* free, Bytes* total) {
  const uint64_t quota = state->broker().Quota(ledger);
  const uint64_t available = state->broker().Available(ledger);
  if (quota == broker::kUnlimited && (!free || available >= *free)) return;
  if (free) *free = static_cast<Bytes>(std::min<uint64_t>(*free, available));
  *total = static_cast<Bytes>(std::min<uint64_t>(quota, *total));
}

}  // namespace
}  // namespace gpuslice::shim

using namespace gpuslice::shim;

CUresult CUDAAPI cuMemGetInfo_v2(size_t* free, size_t* total) {
  const RealDriver* real = nullptr;
  ShimState* state = nullptr;
  if (CUresult rc = EnterHook(&real, &state); rc != CUDA_SUCCESS) return rc;
  const CUresult rc = real->cuMemGetInfo_v2(free, total);
  if (rc != CUDA_SUCCESS) return rc;
  const DriverResult<gpuslice::broker::LedgerId> ledger = state->LedgerForCurrentContext();
  if (!ledger.ok()) return ledger.rc();
  ReapNowAndThen(state);
  // sabotage-point: memory-info-not-narrowed
  Narrow(state, *ledger, free, total);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceTotalMem_v2(size_t* bytes, CUdevice dev) {
  const RealDriver* real = nullptr;
  ShimState* state = nullptr;
  if (CUresult rc = EnterHook(&real, &state); rc != CUDA_SUCCESS) return rc;
  const CUresult rc = real->cuDeviceTotalMem_v2(bytes, dev);
  if (rc != CUDA_SUCCESS) return rc;
  const DriverResult<gpuslice::broker::LedgerId> ledger = state->LedgerForDevice(dev);
  if (!ledger.ok()) return ledger.rc();
  Narrow<size_t>(state, *ledger, nullptr, bytes);
  return CUDA_SUCCESS;
}

// nvidia-smi and pynvml inside the container: the same slice, by the GPU's UUID.
namespace {

// total = the limit (at most the device), used = what the tenant holds, free = what it could
// still allocate (never more than the device has free). The slice has no driver-reserved part.
template <typename Memory>
nvmlReturn_t NarrowNvml(nvmlDevice_t device, Memory* memory) {
  const RealNvml* nvml = RealNvmlIfLoaded();
  ShimState* state = ShimState::Get();
  if (!state) return NVML_ERROR_NO_PERMISSION;
  char text[96] = {};
  uint8_t uuid[16];
  if (!nvml || !nvml->nvmlDeviceGetUUID || nvml->nvmlDeviceGetUUID(device, text, sizeof text) != NVML_SUCCESS ||
      !gpuslice::broker::ParseUuid(text, uuid))
    return NVML_SUCCESS;  // a GPU gpuslice cannot identify is reported as the driver sees it
  const gpuslice::Result<gpuslice::broker::LedgerId> found = state->LedgerForUuid(uuid, memory->total);
  // Not found: its quota cannot be known from NVML alone, and the device is reported as it is.
  if (!found.ok() && found.status().code() == gpuslice::Status::Code::kNotFound) return NVML_SUCCESS;
  if (!found.ok()) {
    // Refused: leave no figure of the whole device behind for a caller that ignores the result.
    memory->total = memory->free = memory->used = 0;
    return NVML_ERROR_NO_PERMISSION;
  }
  const gpuslice::broker::LedgerId ledger = *found;
  ReapNowAndThen(state);
  const uint64_t quota = state->broker().Quota(ledger);
  const uint64_t available = state->broker().Available(ledger);
  if (quota == gpuslice::broker::kUnlimited && available >= memory->free) return NVML_SUCCESS;
  memory->total = std::min<uint64_t>(quota, memory->total);
  memory->used = state->broker().Used(ledger);
  memory->free = std::min<uint64_t>(memory->free, available);
  if constexpr (requires { memory->reserved; }) memory->reserved = 0;
  return NVML_SUCCESS;
}

}  // namespace

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory) {
  const RealNvml* nvml = RealNvmlIfLoaded();
  if (!nvml || !nvml->nvmlDeviceGetMemoryInfo) return NVML_ERROR_UNINITIALIZED;
  const nvmlReturn_t rc = nvml->nvmlDeviceGetMemoryInfo(device, memory);
  return rc == NVML_SUCCESS ? NarrowNvml(device, memory) : rc;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t* memory) {
  const RealNvml* nvml = RealNvmlIfLoaded();
  if (!nvml || !nvml->nvmlDeviceGetMemoryInfo_v2) return NVML_ERROR_UNINITIALIZED;
  const nvmlReturn_t rc = nvml->nvmlDeviceGetMemoryInfo_v2(device, memory);
  return rc == NVML_SUCCESS ? NarrowNvml(device, memory) : rc;
}
