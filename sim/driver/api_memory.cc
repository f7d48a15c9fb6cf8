// Device and host allocations, cuMemGetInfo, copies and memsets.
//
// Device memory is host memory behind the scenes, so copies move real bytes. Synchronous copies
// run in stream order on the default stream and wait; async ones are queued on their stream.
#include "driver_api.h"

#include <algorithm>
#include <cstring>
#include <functional>

#include "driver_state.h"
#include "memory_pool.h"
#include "sim/memory_partitioning.h"

namespace gpuslice::sim {
namespace {

CUresult DeviceRange(Driver* d, CUdeviceptr ptr, size_t bytes) {
  return d->FindRange(ptr, bytes, nullptr) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

// Queues `work` on the stream; a synchronous call (`wait`) then waits for the stream.
CUresult Submit(CUstream stream, bool per_thread, bool wait, std::function<void()> work) {
  CUstream_st* s = nullptr;
  if (CUresult rc = ResolveStream(stream, per_thread, &s); rc != CUDA_SUCCESS) return rc;
  StreamOp op;
  op.kind = StreamOp::Kind::kHostWork;
  op.work = std::move(work);
  s->executor->Enqueue(std::move(op));
  if (wait) s->executor->Synchronize();
  return CUDA_SUCCESS;
}

enum class Side { kHost, kDevice, kAny };

CUresult Copy(CUdeviceptr dst, Side dst_side, CUdeviceptr src, Side src_side, size_t bytes, CUstream stream,
              bool per_thread, bool wait) {
  Driver* d = nullptr;
  CUctx_st* ctx = nullptr;
  if (CUresult rc = RequireContext(&d, &ctx); rc != CUDA_SUCCESS) return rc;
  if (bytes == 0) return CUDA_SUCCESS;
  if (!dst || !src) return CUDA_ERROR_INVALID_VALUE;
  if (dst_side == Side::kDevice && DeviceRange(d, dst, bytes) != CUDA_SUCCESS) return CUDA_ERROR_INVALID_VALUE;
  if (src_side == Side::kDevice && DeviceRange(d, src, bytes) != CUDA_SUCCESS) return CUDA_ERROR_INVALID_VALUE;
  return Submit(stream, per_thread, wait,
                [=] { std::memmove(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), bytes); });
}

template <typename T>
CUresult Fill(CUdeviceptr dst, T value, size_t count, CUstream stream, bool per_thread, bool wait) {
  Driver* d = nullptr;
  CUctx_st* ctx = nullptr;
  if (CUresult rc = RequireContext(&d, &ctx); rc != CUDA_SUCCESS) return rc;
  if (count == 0) return CUDA_SUCCESS;
  if (dst % sizeof(T) != 0 || DeviceRange(d, dst, count * sizeof(T)) != CUDA_SUCCESS) return CUDA_ERROR_INVALID_VALUE;
  return Submit(stream, per_thread, wait, [=] {
    T* p = reinterpret_cast<T*>(dst);
    if constexpr (sizeof(T) == 1) {
      std::memset(p, value, count);
    } else {
      for (size_t i = 0; i < count; ++i) p[i] = value;
    }
  });
}

CUresult Allocate(CUdeviceptr* dptr, size_t bytes, AllocationKind kind) {
  Driver* d = nullptr;
  CUctx_st* ctx = nullptr;
  if (CUresult rc = RequireContext(&d, &ctx); rc != CUDA_SUCCESS) return rc;
  if (!dptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  return d->AllocateDeviceMemory(ctx->device, bytes, kind, nullptr, dptr, ctx);
}

}  // namespace
}  // namespace gpuslice::sim

using namespace gpuslice::sim;

CUresult CUDAAPI cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytesize) try {
  GPUSLICE_SIM_ENTRY();
  return Allocate(dptr, bytesize, AllocationKind::kDevice);
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuMemAllocPitch_v2(CUdeviceptr* dptr, size_t* pPitch, size_t WidthInBytes, size_t Height,
                                    unsigned int ElementSizeBytes) try {
  GPUSLICE_SIM_ENTRY();
  if (!pPitch || WidthInBytes == 0 || Height == 0 ||
      (ElementSizeBytes != 4 && ElementSizeBytes != 8 && ElementSizeBytes != 16))
    return CUDA_ERROR_INVALID_VALUE;
  // Rows are padded to the texture pitch alignment (512 bytes on current GPUs).
  const size_t pitch = (WidthInBytes + 511) & ~size_t{511};
  if (Height > SIZE_MAX / pitch) return CUDA_ERROR_INVALID_VALUE;
  CUresult rc = Allocate(dptr, pitch * Height, AllocationKind::kDevice);
  if (rc == CUDA_SUCCESS) *pPitch = pitch;
  return rc;
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuMemAllocManaged(CUdeviceptr* dptr, size_t bytesize, unsigned int flags) try {
  GPUSLICE_SIM_ENTRY();
  if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST) return CUDA_ERROR_INVALID_VALUE;
  return Allocate(dptr, bytesize, AllocationKind::kManaged);
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuMemFree_v2(CUdeviceptr dptr) try {
  GPUSLICE_SIM_ENTRY();
  Driver* d = nullptr;
  CUctx_st* ctx = nullptr;
  if (CUresult rc = RequireContext(&d, &ctx); rc != CUDA_SUCCESS) return rc;
  if (dptr == 0) return CUDA_SUCCESS;
  Allocation a;
  if (!d->FindRange(dptr, 0, &a) || a.base != dptr) return CUDA_ERROR_INVALID_VALUE;
  // Stream-ordered allocations may be freed synchronously too; they go back to their pool.
  if (a.kind == AllocationKind::kPool) return FreePoolAllocationNow(dptr);
  if (a.kind != AllocationKind::kDevice && a.kind != AllocationKind::kManaged) return CUDA_ERROR_INVALID_VALUE;
  // cuMemFree synchronises with the device first, as the real driver does.
  SynchronizeContext(ctx);
  return d->FreeDeviceMemory(dptr);
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuMemGetInfo_v2(size_t* free, size_t* total) try {
  GPUSLICE_SIM_ENTRY();
  Driver* d = nullptr;
  CUctx_st* ctx = nullptr;
  if (CUresult rc = RequireContext(&d, &ctx); rc != CUDA_SUCCESS) return rc;
  if (!free || !total) return CUDA_ERROR_INVALID_VALUE;
  const uint64_t capacity = d->device_config(ctx->device).total_memory;
  const uint64_t used = d->state().MemoryUsed(d->unit(ctx->device));
  // Under a hard limit of its cgroup (driver r615 and later), the limit is the device's size.
  const CgroupRoom room =
      CgroupRoomOf(d->state(), d->unit(ctx->device), d->state().segment().partitioning.process_cgroup[d->slot()]);
  *total = std::min(capacity, room.limit);
  *free = std::min(used >= capacity ? 0 : capacity - used, room.left);
  return CUDA_SUCCESS;
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuMemGetAddressRange_v2(CUdeviceptr* pbase, size_t* psize, CUdeviceptr dptr) try {
  GPUSLICE_SIM_ENTRY();
  Driver* d = nullptr;
  CUctx_st* ctx = nullptr;
  if (CUresult rc = RequireContext(&d, &ctx); rc != CUDA_SUCCESS) return rc;
  Allocation a;
  if (!d->FindRange(dptr, 0, &a) || dptr == a.base + a.size) return CUDA_ERROR_NOT_FOUND;
  if (pbase) *pbase = a.base;
  if (psize) *psize = a.size;
  return CUDA_SUCCESS;
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuMemHostAlloc(void** pp, size_t bytesize, unsigned int Flags) try {
  GPUSLICE_SIM_ENTRY();
  Driver* d = nullptr;
  CUctx_st* ctx = nullptr;
  if (CUresult rc = RequireContext(&d, &ctx); rc != CUDA_SUCCESS) return rc;
  if (!pp || bytesize == 0) return CUDA_ERROR_INVALID_VALUE;
  void* p = std::malloc(bytesize);
  if (!p) return CUDA_ERROR_OUT_OF_MEMORY;
  Allocation a;
  a.base = reinterpret_cast<CUdeviceptr>(p);
  a.size = bytesize;
  a.kind = AllocationKind::kHost;
  a.device = ctx->device;
  a.context = ctx;
  d->AddRange(a);  // pinned host memory is device-accessible
  *pp = p;
  return CUDA_SUCCESS;
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuMemAllocHost_v2(void** pp, size_t bytesize) try {
  GPUSLICE_SIM_ENTRY();
  return cuMemHostAlloc(pp, bytesize, 0);
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuMemFreeHost(void* p) try {
  GPUSLICE_SIM_ENTRY();
  Driver* d = nullptr;
  CUctx_st* ctx = nullptr;
  if (CUresult rc = RequireContext(&d, &ctx); rc != CUDA_SUCCESS) return rc;
  Allocation a;
  if (!d->FindRange(reinterpret_cast<CUdeviceptr>(p), 0, &a) || a.kind != AllocationKind::kHost ||
      a.base != reinterpret_cast<CUdeviceptr>(p))
    return CUDA_ERROR_INVALID_VALUE;
  d->RemoveRange(a.base, nullptr);
  std::free(p);
  return CUDA_SUCCESS;
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuMemHostGetDevicePointer_v2(CUdeviceptr* pdptr, void* p, unsigned int Flags) try {
  GPUSLICE_SIM_ENTRY();
  Driver* d = nullptr;
  CUctx_st* ctx = nullptr;
  if (CUresult rc = RequireContext(&d, &ctx); rc != CUDA_SUCCESS) return rc;
  if (!pdptr || Flags != 0 || !d->FindRange(reinterpret_cast<CUdeviceptr>(p), 0, nullptr))
    return CUDA_ERROR_INVALID_VALUE;
  *pdptr = reinterpret_cast<CUdeviceptr>(p);
  return CUDA_SUCCESS;
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

// --- copies: legacy-stream and per-thread (_ptds/_ptsz) flavours ---
#define GPUSLICE_COPY_PAIR(NAME, PARAMS, DST, DST_SIDE, SRC, SRC_SIDE, BYTES) \
  CUresult CUDAAPI NAME PARAMS try {                                          \
    return Copy(DST, DST_SIDE, SRC, SRC_SIDE, BYTES, nullptr, false, true);   \
  } catch (...) {                                                             \
    return EntryFailed<CUresult>(#NAME);                                      \
  }                                                                           \
  CUresult CUDAAPI NAME##_ptds PARAMS try {                                   \
    return Copy(DST, DST_SIDE, SRC, SRC_SIDE, BYTES, nullptr, true, true);    \
  } catch (...) {                                                             \
    return EntryFailed<CUresult>(#NAME "_ptds");                              \
  }

#define GPUSLICE_ASYNC_COPY_PAIR(NAME, PARAMS, DST, DST_SIDE, SRC, SRC_SIDE, BYTES) \
  CUresult CUDAAPI NAME PARAMS try {                                                \
    return Copy(DST, DST_SIDE, SRC, SRC_SIDE, BYTES, hStream, false, false);        \
  } catch (...) {                                                                   \
    return EntryFailed<CUresult>(#NAME);                                            \
  }                                                                                 \
  CUresult CUDAAPI NAME##_ptsz PARAMS try {                                         \
    return Copy(DST, DST_SIDE, SRC, SRC_SIDE, BYTES, hStream, true, false);         \
  } catch (...) {                                                                   \
    return EntryFailed<CUresult>(#NAME "_ptsz");                                    \
  }

#define HOST_PTR(p) reinterpret_cast<CUdeviceptr>(p)

GPUSLICE_COPY_PAIR(cuMemcpy, (CUdeviceptr dst, CUdeviceptr src, size_t ByteCount), dst, Side::kAny, src, Side::kAny,
                   ByteCount)
GPUSLICE_COPY_PAIR(cuMemcpyHtoD_v2, (CUdeviceptr dstDevice, const void* srcHost, size_t ByteCount), dstDevice,
                   Side::kDevice, HOST_PTR(srcHost), Side::kHost, ByteCount)
GPUSLICE_COPY_PAIR(cuMemcpyDtoH_v2, (void* dstHost, CUdeviceptr srcDevice, size_t ByteCount), HOST_PTR(dstHost),
                   Side::kHost, srcDevice, Side::kDevice, ByteCount)
GPUSLICE_COPY_PAIR(cuMemcpyDtoD_v2, (CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount), dstDevice,
                   Side::kDevice, srcDevice, Side::kDevice, ByteCount)
GPUSLICE_ASYNC_COPY_PAIR(cuMemcpyAsync, (CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream), dst,
                         Side::kAny, src, Side::kAny, ByteCount)
GPUSLICE_ASYNC_COPY_PAIR(cuMemcpyHtoDAsync_v2,
                         (CUdeviceptr dstDevice, const void* srcHost, size_t ByteCount, CUstream hStream), dstDevice,
                         Side::kDevice, HOST_PTR(srcHost), Side::kHost, ByteCount)
GPUSLICE_ASYNC_COPY_PAIR(cuMemcpyDtoHAsync_v2,
                         (void* dstHost, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream), HOST_PTR(dstHost),
                         Side::kHost, srcDevice, Side::kDevice, ByteCount)
GPUSLICE_ASYNC_COPY_PAIR(cuMemcpyDtoDAsync_v2,
                         (CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream), dstDevice,
                         Side::kDevice, srcDevice, Side::kDevice, ByteCount)

// --- memsets ---
#define GPUSLICE_MEMSET_PAIR(NAME, T)                                          \
  CUresult CUDAAPI NAME(CUdeviceptr dstDevice, T value, size_t N) try {        \
    return Fill(dstDevice, value, N, nullptr, false, true);                    \
  } catch (...) {                                                              \
    return EntryFailed<CUresult>(#NAME);                                       \
  }                                                                            \
  CUresult CUDAAPI NAME##_ptds(CUdeviceptr dstDevice, T value, size_t N) try { \
    return Fill(dstDevice, value, N, nullptr, true, true);                     \
  } catch (...) {                                                              \
    return EntryFailed<CUresult>(#NAME "_ptds");                               \
  }

#define GPUSLICE_ASYNC_MEMSET_PAIR(NAME, T)                                                      \
  CUresult CUDAAPI NAME(CUdeviceptr dstDevice, T value, size_t N, CUstream hStream) try {        \
    return Fill(dstDevice, value, N, hStream, false, false);                                     \
  } catch (...) {                                                                                \
    return EntryFailed<CUresult>(#NAME);                                                         \
  }                                                                                              \
  CUresult CUDAAPI NAME##_ptsz(CUdeviceptr dstDevice, T value, size_t N, CUstream hStream) try { \
    return Fill(dstDevice, value, N, hStream, true, false);                                      \
  } catch (...) {                                                                                \
    return EntryFailed<CUresult>(#NAME "_ptsz");                                                 \
  }

GPUSLICE_MEMSET_PAIR(cuMemsetD8_v2, unsigned char)
GPUSLICE_MEMSET_PAIR(cuMemsetD16_v2, unsigned short)
GPUSLICE_MEMSET_PAIR(cuMemsetD32_v2, unsigned int)
GPUSLICE_ASYNC_MEMSET_PAIR(cuMemsetD8Async, unsigned char)
GPUSLICE_ASYNC_MEMSET_PAIR(cuMemsetD16Async, unsigned short)
GPUSLICE_ASYNC_MEMSET_PAIR(cuMemsetD32Async, unsigned int)
