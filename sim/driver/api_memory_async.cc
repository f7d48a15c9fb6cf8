// Stream-ordered allocation: cuMemAllocAsync and cuMemAllocFromPoolAsync take from a pool at
// once (stream order only matters for reuse after a free), cuMemFreeAsync returns the block to its
// pool when the stream reaches the free (pool_allocator.h has the model).
#include "driver_api.h"

#include <utility>

#include "driver_state.h"
#include "pool_allocator.h"
#include "pool_registry.h"
#include "stream_executor.h"

namespace gpuslice::sim {
namespace {

CUresult AllocAsync(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool, bool explicit_pool, CUstream stream,
                    bool per_thread) {
  Driver* d = nullptr;
  if (CUresult rc = RequireInit(&d); rc != CUDA_SUCCESS) return rc;
  CUstream_st* s = nullptr;
  if (CUresult rc = ResolveStream(stream, per_thread, &s); rc != CUDA_SUCCESS) return rc;
  if (!dptr || bytesize == 0) return CUDA_ERROR_INVALID_VALUE;
  if (explicit_pool) {
    if (!ValidPool(d, pool)) return CUDA_ERROR_INVALID_VALUE;
  } else {
    pool = CurrentPool(d, s->context->device);
  }
  // The allocation is usable at once; stream order only matters for its reuse after a free.
  return AllocateFromPool(pool, bytesize, dptr);
}

CUresult FreeAsync(CUdeviceptr dptr, CUstream stream, bool per_thread) {
  Driver* d = nullptr;
  if (CUresult rc = RequireInit(&d); rc != CUDA_SUCCESS) return rc;
  CUstream_st* s = nullptr;
  if (CUresult rc = ResolveStream(stream, per_thread, &s); rc != CUDA_SUCCESS) return rc;
  Pool* pool = ClaimPoolAllocation(d, dptr);
  if (!pool) return CUDA_ERROR_INVALID_VALUE;
  // The block goes back to the pool when the stream reaches the free.
  StreamOp op;
  op.kind = StreamOp::Kind::kHostWork;
  op.work = [pool, dptr] { ReturnToPool(pool, dptr); };
  s->executor->Enqueue(std::move(op));
  return CUDA_SUCCESS;
}

}  // namespace
}  // namespace gpuslice::sim

using namespace gpuslice::sim;

CUresult CUDAAPI cuMemAllocAsync(CUdeviceptr* dptr, size_t bytesize, CUstream hStream) try {
  GPUSLICE_SIM_ENTRY();
  return AllocAsync(dptr, bytesize, nullptr, false, hStream, false);
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuMemAllocAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUstream hStream) try {
  GPUSLICE_SIM_ENTRY();
  return AllocAsync(dptr, bytesize, nullptr, false, hStream, true);
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuMemAllocFromPoolAsync(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream) try {
  GPUSLICE_SIM_ENTRY();
  return AllocAsync(dptr, bytesize, pool, true, hStream, false);
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool,
                                              CUstream hStream) try {
  GPUSLICE_SIM_ENTRY();
  return AllocAsync(dptr, bytesize, pool, true, hStream, true);
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream) try {
  GPUSLICE_SIM_ENTRY();
  return FreeAsync(dptr, hStream, false);
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream) try {
  GPUSLICE_SIM_ENTRY();
  return FreeAsync(dptr, hStream, true);
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}
