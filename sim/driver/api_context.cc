// Contexts: creation, the per-thread current-context stack, primary contexts, synchronisation.
#include "driver_api.h"

#include <memory>
#include <vector>

#include "driver_state.h"
#include "memory_pool.h"

namespace gpuslice::sim {

// Waits for every stream of the context, then lets pools give back memory (a sync point).
CUresult SynchronizeContext(CUctx_st* ctx) {
  // The executors, not the streams: another thread may destroy a stream meanwhile.
  std::vector<std::shared_ptr<StreamExecutor>> executors;
  {
    std::lock_guard<std::mutex> lock(ctx->mutex);
    for (CUstream_st* s : ctx->streams) executors.push_back(s->executor);
  }
  for (const auto& executor : executors) executor->Synchronize();
  TrimPoolsAtSynchronize(ctx->device);
  if (CUresult error = Driver::Get()->ContextError(ctx); error != CUDA_SUCCESS) return error;
  return CUDA_SUCCESS;
}

CUresult DevicePrimaryCtxRetain(CUcontext* pctx, CUdevice dev) {
  Driver* d = nullptr;
  if (CUresult rc = RequireDevice(&d, dev); rc != CUDA_SUCCESS) return rc;
  if (!pctx) return CUDA_ERROR_INVALID_VALUE;
  CUctx_st* ctx = d->PrimaryContext(dev);
  if (!ctx) return CUDA_ERROR_OUT_OF_MEMORY;
  std::lock_guard<std::mutex> lock(d->mutex_);
  ++d->primary_refs_[dev];
  *pctx = ctx;
  return CUDA_SUCCESS;
}

CUresult DevicePrimaryCtxRelease(CUdevice dev) {
  Driver* d = nullptr;
  if (CUresult rc = RequireDevice(&d, dev); rc != CUDA_SUCCESS) return rc;
  CUctx_st* to_destroy = nullptr;
  {
    std::lock_guard<std::mutex> lock(d->mutex_);
    if (d->primary_refs_[dev] <= 0) return CUDA_ERROR_INVALID_CONTEXT;
    if (--d->primary_refs_[dev] == 0) std::swap(to_destroy, d->primary_[dev]);
  }
  if (to_destroy) {
    SynchronizeContext(to_destroy);
    d->DestroyContext(to_destroy);
  }
  return CUDA_SUCCESS;
}

CUresult DevicePrimaryCtxReset(CUdevice dev) {
  Driver* d = nullptr;
  if (CUresult rc = RequireDevice(&d, dev); rc != CUDA_SUCCESS) return rc;
  CUctx_st* to_destroy = nullptr;
  {
    std::lock_guard<std::mutex> lock(d->mutex_);
    d->primary_refs_[dev] = 0;
    std::swap(to_destroy, d->primary_[dev]);
  }
  if (to_destroy) {
    SynchronizeContext(to_destroy);
    d->DestroyContext(to_destroy);
  }
  return CUDA_SUCCESS;
}

CUresult DevicePrimaryCtxGetState(CUdevice dev, unsigned int* flags, int* active) {
  Driver* d = nullptr;
  if (CUresult rc = RequireDevice(&d, dev); rc != CUDA_SUCCESS) return rc;
  if (!flags || !active) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(d->mutex_);
  *active = d->primary_refs_[dev] > 0 ? 1 : 0;
  *flags = d->primary_[dev] ? d->primary_[dev]->flags : 0;
  return CUDA_SUCCESS;
}

namespace {

CUresult CreateUserContext(CUcontext* pctx, unsigned int flags, CUdevice dev) {
  Driver* d = nullptr;
  if (CUresult rc = RequireDevice(&d, dev); rc != CUDA_SUCCESS) return rc;
  if (!pctx) return CUDA_ERROR_INVALID_VALUE;
  CUctx_st* ctx = nullptr;
  if (CUresult rc = d->CreateContext(dev, flags, false, &ctx); rc != CUDA_SUCCESS) return rc;
  PushContext(ctx);  // cuCtxCreate makes the new context current
  *pctx = ctx;
  return CUDA_SUCCESS;
}

}  // namespace
}  // namespace gpuslice::sim

using namespace gpuslice::sim;

CUresult CUDAAPI cuCtxCreate_v2(CUcontext* pctx, unsigned int flags, CUdevice dev) try {
  GPUSLICE_SIM_ENTRY();
  return CreateUserContext(pctx, flags, dev);
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuCtxCreate_v3(CUcontext* pctx, CUexecAffinityParam* paramsArray, int numParams, unsigned int flags,
                                CUdevice dev) try {
  GPUSLICE_SIM_ENTRY();
  if (numParams < 0 || (numParams > 0 && !paramsArray)) return CUDA_ERROR_INVALID_VALUE;
  return CreateUserContext(pctx, flags, dev);
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuCtxCreate_v4(CUcontext* pctx, CUctxCreateParams* ctxCreateParams, unsigned int flags,
                                CUdevice dev) try {
  GPUSLICE_SIM_ENTRY();
  return CreateUserContext(pctx, flags, dev);
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuCtxDestroy_v2(CUcontext ctx) try {
  GPUSLICE_SIM_ENTRY();
  Driver* d = nullptr;
  if (CUresult rc = RequireInit(&d); rc != CUDA_SUCCESS) return rc;
  if (!ctx || !d->IsRegistered(ctx) || ctx->primary) return CUDA_ERROR_INVALID_CONTEXT;
  SynchronizeContext(ctx);
  return d->DestroyContext(ctx);
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuCtxGetCurrent(CUcontext* pctx) try {
  GPUSLICE_SIM_ENTRY();
  Driver* d = nullptr;
  if (CUresult rc = RequireInit(&d); rc != CUDA_SUCCESS) return rc;
  if (!pctx) return CUDA_ERROR_INVALID_VALUE;
  *pctx = CurrentContextOrNull();
  return CUDA_SUCCESS;
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuCtxSetCurrent(CUcontext ctx) try {
  GPUSLICE_SIM_ENTRY();
  Driver* d = nullptr;
  if (CUresult rc = RequireInit(&d); rc != CUDA_SUCCESS) return rc;
  if (ctx && !d->IsRegistered(ctx)) return CUDA_ERROR_INVALID_CONTEXT;
  SetCurrentContext(ctx);
  return CUDA_SUCCESS;
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuCtxPushCurrent_v2(CUcontext ctx) try {
  GPUSLICE_SIM_ENTRY();
  Driver* d = nullptr;
  if (CUresult rc = RequireInit(&d); rc != CUDA_SUCCESS) return rc;
  if (!ctx || !d->IsRegistered(ctx)) return CUDA_ERROR_INVALID_CONTEXT;
  PushContext(ctx);
  return CUDA_SUCCESS;
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuCtxPopCurrent_v2(CUcontext* pctx) try {
  GPUSLICE_SIM_ENTRY();
  Driver* d = nullptr;
  if (CUresult rc = RequireInit(&d); rc != CUDA_SUCCESS) return rc;
  CUctx_st* top = PopContext();
  if (!top) return CUDA_ERROR_INVALID_CONTEXT;
  if (pctx) *pctx = top;
  return CUDA_SUCCESS;
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuCtxGetDevice(CUdevice* device) try {
  GPUSLICE_SIM_ENTRY();
  Driver* d = nullptr;
  CUctx_st* ctx = nullptr;
  if (CUresult rc = RequireContext(&d, &ctx); rc != CUDA_SUCCESS) return rc;
  if (!device) return CUDA_ERROR_INVALID_VALUE;
  *device = ctx->device;
  return CUDA_SUCCESS;
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuCtxGetFlags(unsigned int* flags) try {
  GPUSLICE_SIM_ENTRY();
  Driver* d = nullptr;
  CUctx_st* ctx = nullptr;
  if (CUresult rc = RequireContext(&d, &ctx); rc != CUDA_SUCCESS) return rc;
  if (!flags) return CUDA_ERROR_INVALID_VALUE;
  *flags = ctx->flags;
  return CUDA_SUCCESS;
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuCtxGetApiVersion(CUcontext ctx, unsigned int* version) try {
  GPUSLICE_SIM_ENTRY();
  Driver* d = nullptr;
  if (CUresult rc = RequireInit(&d); rc != CUDA_SUCCESS) return rc;
  if (!version) return CUDA_ERROR_INVALID_VALUE;
  if (!ctx) ctx = CurrentContextOrNull();
  if (!ctx || !d->IsRegistered(ctx)) return CUDA_ERROR_INVALID_CONTEXT;
  *version = 3020;  // the context API version every current driver reports
  return CUDA_SUCCESS;
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuCtxSynchronize() try {
  GPUSLICE_SIM_ENTRY();
  Driver* d = nullptr;
  CUctx_st* ctx = nullptr;
  if (CUresult rc = RequireContext(&d, &ctx); rc != CUDA_SUCCESS) return rc;
  return SynchronizeContext(ctx);
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuCtxSynchronize_v2(CUcontext ctx) try {
  GPUSLICE_SIM_ENTRY();
  Driver* d = nullptr;
  if (CUresult rc = RequireInit(&d); rc != CUDA_SUCCESS) return rc;
  if (!ctx) return cuCtxSynchronize();
  if (!d->IsRegistered(ctx)) return CUDA_ERROR_INVALID_CONTEXT;
  return SynchronizeContext(ctx);
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuCtxGetStreamPriorityRange(int* leastPriority, int* greatestPriority) try {
  GPUSLICE_SIM_ENTRY();
  Driver* d = nullptr;
  CUctx_st* ctx = nullptr;
  if (CUresult rc = RequireContext(&d, &ctx); rc != CUDA_SUCCESS) return rc;
  if (leastPriority) *leastPriority = 0;
  if (greatestPriority) *greatestPriority = -5;
  return CUDA_SUCCESS;
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuCtxSetLimit(CUlimit limit, size_t value) try {
  GPUSLICE_SIM_ENTRY();
  Driver* d = nullptr;
  CUctx_st* ctx = nullptr;
  if (CUresult rc = RequireContext(&d, &ctx); rc != CUDA_SUCCESS) return rc;
  if (limit < 0 || limit >= CU_LIMIT_MAX) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;  // limits change no simulated behaviour
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext* pctx, CUdevice dev) try {
  GPUSLICE_SIM_ENTRY();
  return DevicePrimaryCtxRetain(pctx, dev);
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}
CUresult CUDAAPI cuDevicePrimaryCtxRelease_v2(CUdevice dev) try {
  GPUSLICE_SIM_ENTRY();
  return DevicePrimaryCtxRelease(dev);
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}
CUresult CUDAAPI cuDevicePrimaryCtxReset_v2(CUdevice dev) try {
  GPUSLICE_SIM_ENTRY();
  return DevicePrimaryCtxReset(dev);
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}
CUresult CUDAAPI cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int* flags, int* active) try {
  GPUSLICE_SIM_ENTRY();
  return DevicePrimaryCtxGetState(dev, flags, active);
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}
CUresult CUDAAPI cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int flags) try {
  GPUSLICE_SIM_ENTRY();
  Driver* d = nullptr;
  if (CUresult rc = RequireDevice(&d, dev); rc != CUDA_SUCCESS) return rc;
  if (CUctx_st* ctx = d->PrimaryContext(dev)) ctx->flags = flags;
  return CUDA_SUCCESS;
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}
