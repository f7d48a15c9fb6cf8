// The device stream-ordered memory lives on. cuMemAllocAsync takes from the current pool of
// the stream's device and cuMemAllocFromPoolAsync from the given pool, whatever context is
// current: charging the current context's device would put the bytes on another GPU's ledger.
#include "common/mutex_lock.h"
#include "shim/real_driver.h"
#include "shim/shim_state.h"

namespace gpuslice::shim {
namespace {

bool DefaultStream(CUstream stream) {
  return stream == nullptr || stream == CU_STREAM_LEGACY || stream == CU_STREAM_PER_THREAD;
}

}  // namespace

// The stream's context is made current for one query, as the CUDA 12.0 API allows.
CUresult ShimState::DeviceOfStream(CUstream stream, CUdevice* device) {
  const RealDriver* real = Real();
  if (DefaultStream(stream)) return real->cuCtxGetDevice(device);  // the current context's
  CUcontext context = nullptr;
  if (!real->cuStreamGetCtx) return CUDA_ERROR_NOT_SUPPORTED;
  if (CUresult rc = real->cuStreamGetCtx(stream, &context); rc != CUDA_SUCCESS) return rc;
  if (CUresult rc = real->cuCtxPushCurrent_v2(context); rc != CUDA_SUCCESS) return rc;
  const CUresult rc = real->cuCtxGetDevice(device);
  CUcontext popped = nullptr;
  real->cuCtxPopCurrent_v2(&popped);
  return rc;
}

DriverResult<broker::LedgerId> ShimState::LedgerForStream(CUstream stream) {
  CUdevice device = 0;
  if (CUresult rc = DeviceOfStream(stream, &device); rc != CUDA_SUCCESS) return rc;
  return LedgerForDevice(device);
}

void ShimState::NotePool(CUmemoryPool pool, CUdevice device) {
  // sabotage-point: pool-lock-removed
  MutexLock lock(&pools_mutex_);
  for (auto& [p, d] : pools_) {
    if (p == pool) {
      d = device;
      return;
    }
  }
  try {
    pools_.emplace_back(pool, device);
  } catch (...) {  // not remembered: its allocations are charged to the stream's device instead
  }
}

void ShimState::ForgetPool(CUmemoryPool pool) {
  MutexLock lock(&pools_mutex_);
  std::erase_if(pools_, [&](const auto& entry) { return entry.first == pool; });
}

DriverResult<broker::LedgerId> ShimState::LedgerForPool(CUmemoryPool pool, CUstream stream) {
  {
    MutexLock lock(&pools_mutex_);
    for (const auto& [p, d] : pools_)
      if (p == pool) return LedgerForDevice(d);
  }
  // Not created here: a device's default pool (asked for once, then remembered), or a pool
  // imported from another process, whose device only its stream can tell.
  const RealDriver* real = Real();
  int count = 0;
  if (real->cuDeviceGetCount && real->cuDeviceGetDefaultMemPool && real->cuDeviceGetCount(&count) == CUDA_SUCCESS) {
    for (CUdevice d = 0; d < count; ++d) {
      CUmemoryPool default_pool = nullptr;
      if (real->cuDeviceGetDefaultMemPool(&default_pool, d) == CUDA_SUCCESS && default_pool == pool) {
        NotePool(pool, d);
        return LedgerForDevice(d);
      }
    }
  }
  return LedgerForStream(stream);
}

}  // namespace gpuslice::shim
