// Memory pools as the driver API exposes them: a device's default and current pool, a pool's
// creation and destruction, its attributes, trimming and access. How a pool holds and hands out
// memory is pool_allocator.h's; cuMemAllocAsync and cuMemFreeAsync are api_memory_async.cc's.
#include "driver_api.h"

#include <mutex>

#include "driver_state.h"
#include "pool_allocator.h"
#include "pool_registry.h"

namespace gpuslice::sim {
namespace {

bool ValidPoolProps(Driver* d, const CUmemPoolProps* props, CUresult* error) {
  *error = CUDA_ERROR_INVALID_VALUE;
  if (!props) return false;
  if (props->allocType != CU_MEM_ALLOCATION_TYPE_PINNED) return false;
  if (props->location.type == CU_MEM_LOCATION_TYPE_HOST || props->location.type == CU_MEM_LOCATION_TYPE_HOST_NUMA ||
      props->location.type == CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT) {
    *error = CUDA_ERROR_NOT_SUPPORTED;  // host pools exist on real drivers; not simulated
    return false;
  }
  if (props->location.type != CU_MEM_LOCATION_TYPE_DEVICE) return false;
  if (props->location.id < 0 || props->location.id >= d->device_count()) {
    *error = CUDA_ERROR_INVALID_DEVICE;
    return false;
  }
  const unsigned known_handles = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR | CU_MEM_HANDLE_TYPE_FABRIC;
  if (static_cast<unsigned>(props->handleTypes) & ~known_handles) return false;
  if (props->win32SecurityAttributes) return false;
  for (unsigned char b : props->reserved)
    if (b) return false;
  return true;
}

}  // namespace
}  // namespace gpuslice::sim

using namespace gpuslice::sim;

// ---- Pools of a device ----

CUresult CUDAAPI cuDeviceGetDefaultMemPool(CUmemoryPool* pool_out, CUdevice dev) try {
  GPUSLICE_SIM_ENTRY();
  Driver* d = nullptr;
  if (CUresult rc = RequireDevice(&d, dev); rc != CUDA_SUCCESS) return rc;
  if (!pool_out) return CUDA_ERROR_INVALID_VALUE;
  *pool_out = DefaultPool(d, dev);
  return CUDA_SUCCESS;
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuDeviceGetMemPool(CUmemoryPool* pool, CUdevice dev) try {
  GPUSLICE_SIM_ENTRY();
  Driver* d = nullptr;
  if (CUresult rc = RequireDevice(&d, dev); rc != CUDA_SUCCESS) return rc;
  if (!pool) return CUDA_ERROR_INVALID_VALUE;
  *pool = CurrentPool(d, dev);
  return CUDA_SUCCESS;
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool) try {
  GPUSLICE_SIM_ENTRY();
  Driver* d = nullptr;
  if (CUresult rc = RequireDevice(&d, dev); rc != CUDA_SUCCESS) return rc;
  if (!ValidPool(d, pool)) return CUDA_ERROR_INVALID_HANDLE;
  if (pool->device != dev) return CUDA_ERROR_INVALID_VALUE;
  SetCurrentPool(d, dev, pool);
  return CUDA_SUCCESS;
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

// ---- Pool lifetime ----

CUresult CUDAAPI cuMemPoolCreate(CUmemoryPool* pool, const CUmemPoolProps* poolProps) try {
  GPUSLICE_SIM_ENTRY();
  Driver* d = nullptr;
  if (CUresult rc = RequireInit(&d); rc != CUDA_SUCCESS) return rc;
  if (!pool) return CUDA_ERROR_INVALID_VALUE;
  CUresult error = CUDA_SUCCESS;
  if (!ValidPoolProps(d, poolProps, &error)) return error;
  *pool = CreatePool(d, *poolProps);
  return CUDA_SUCCESS;
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuMemPoolDestroy(CUmemoryPool pool) try {
  GPUSLICE_SIM_ENTRY();
  Driver* d = nullptr;
  if (CUresult rc = RequireInit(&d); rc != CUDA_SUCCESS) return rc;
  if (!ValidPool(d, pool) || pool->is_default) return CUDA_ERROR_INVALID_VALUE;
  ForgetPool(d, pool);
  std::unique_lock<std::mutex> lock(pool->mutex);
  pool->destroyed = true;
  ReleaseUnusedChunks(pool, 0);
  // As documented: with allocations outstanding the call returns at once and the pool goes
  // when the last of them is freed.
  if (pool->outstanding != 0) return CUDA_SUCCESS;
  lock.unlock();
  delete pool;
  return CUDA_SUCCESS;
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

// ---- Attributes ----

CUresult CUDAAPI cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void* value) try {
  GPUSLICE_SIM_ENTRY();
  Driver* d = nullptr;
  if (CUresult rc = RequireInit(&d); rc != CUDA_SUCCESS) return rc;
  if (!ValidPool(d, pool) || !value) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(pool->mutex);
  switch (attr) {
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
      pool->reuse_follow_event_dependencies = *static_cast<int*>(value) != 0;
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
      pool->reuse_allow_opportunistic = *static_cast<int*>(value) != 0;
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
      pool->reuse_allow_internal_dependencies = *static_cast<int*>(value) != 0;
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
      // Takes effect at the next synchronisation, as on the real driver.
      pool->release_threshold = *static_cast<cuuint64_t*>(value);
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
      // A high watermark can only be reset ("to zero"): it restarts from the current value.
      if (*static_cast<cuuint64_t*>(value) != 0) return CUDA_ERROR_INVALID_VALUE;
      pool->reserved_high = pool->reserved;
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
      if (*static_cast<cuuint64_t*>(value) != 0) return CUDA_ERROR_INVALID_VALUE;
      pool->used_high = pool->used;
      return CUDA_SUCCESS;
    default: return CUDA_ERROR_INVALID_VALUE;  // the *_CURRENT values are read-only
  }
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void* value) try {
  GPUSLICE_SIM_ENTRY();
  Driver* d = nullptr;
  if (CUresult rc = RequireInit(&d); rc != CUDA_SUCCESS) return rc;
  if (!ValidPool(d, pool) || !value) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(pool->mutex);
  switch (attr) {
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
      *static_cast<int*>(value) = pool->reuse_follow_event_dependencies;
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
      *static_cast<int*>(value) = pool->reuse_allow_opportunistic;
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
      *static_cast<int*>(value) = pool->reuse_allow_internal_dependencies;
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
      *static_cast<cuuint64_t*>(value) = pool->release_threshold;
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT: *static_cast<cuuint64_t*>(value) = pool->reserved; return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH: *static_cast<cuuint64_t*>(value) = pool->reserved_high; return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_USED_MEM_CURRENT: *static_cast<cuuint64_t*>(value) = pool->used; return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH: *static_cast<cuuint64_t*>(value) = pool->used_high; return CUDA_SUCCESS;
    default: return CUDA_ERROR_INVALID_VALUE;
  }
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep) try {
  GPUSLICE_SIM_ENTRY();
  Driver* d = nullptr;
  if (CUresult rc = RequireInit(&d); rc != CUDA_SUCCESS) return rc;
  if (!ValidPool(d, pool)) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(pool->mutex);
  ReleaseUnusedChunks(pool, minBytesToKeep);
  return CUDA_SUCCESS;
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

// Pool memory is accessible from the pool's own device (the only one simulated per pool).
CUresult CUDAAPI cuMemPoolGetAccess(CUmemAccess_flags* flags, CUmemoryPool memPool, CUmemLocation* location) try {
  GPUSLICE_SIM_ENTRY();
  Driver* d = nullptr;
  if (CUresult rc = RequireInit(&d); rc != CUDA_SUCCESS) return rc;
  if (!flags || !location || !ValidPool(d, memPool)) return CUDA_ERROR_INVALID_VALUE;
  if (location->type != CU_MEM_LOCATION_TYPE_DEVICE) return CUDA_ERROR_INVALID_VALUE;
  if (location->id < 0 || location->id >= d->device_count()) return CUDA_ERROR_INVALID_DEVICE;
  *flags = location->id == memPool->device ? CU_MEM_ACCESS_FLAGS_PROT_READWRITE : CU_MEM_ACCESS_FLAGS_PROT_NONE;
  return CUDA_SUCCESS;
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

// Peer access to a pool: validated and accepted (one address space serves every device).
CUresult CUDAAPI cuMemPoolSetAccess(CUmemoryPool pool, const CUmemAccessDesc* map, size_t count) try {
  GPUSLICE_SIM_ENTRY();
  Driver* d = nullptr;
  if (CUresult rc = RequireInit(&d); rc != CUDA_SUCCESS) return rc;
  if (!ValidPool(d, pool) || (count && !map)) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < count; ++i) {
    if (map[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE) return CUDA_ERROR_INVALID_VALUE;
    if (map[i].location.id < 0 || map[i].location.id >= d->device_count()) return CUDA_ERROR_INVALID_DEVICE;
    if (map[i].flags != CU_MEM_ACCESS_FLAGS_PROT_NONE && map[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READ &&
        map[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
      return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}
