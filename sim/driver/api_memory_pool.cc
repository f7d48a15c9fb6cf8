// Stream-ordered allocation from memory pools: cuMemAllocAsync, cuMemFreeAsync, pools and their
// attributes, as the real driver behaves.
//
// The model (exact, so that gpuslice can decide how to count pool memory against quotas):
//  - A pool reserves device memory in chunks. A chunk is charged to the device in full
//    (Driver::ChargeDevice) when the pool grows and credited when it is released; the sum of the
//    pool's chunks is CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, and it is exactly what the pool adds
//    to the process's device memory (cuMemGetInfo, the simulator's memory_used).
//  - A chunk is the request rounded up to kChunkGranularity (2 MiB). Allocations are carved out
//    of chunks (best fit, split); each takes its size rounded up to 512 bytes (ChargedBytes).
//    CU_MEMPOOL_ATTR_USED_MEM_CURRENT is the sum of those rounded sizes of live allocations;
//    RESERVED - USED is memory the pool holds for reuse.
//  - A free (cuMemFreeAsync, in stream order) returns the block to the pool: it stays reserved
//    and is reused by later allocations it fits; neighbouring free blocks of a chunk merge.
//  - Only entirely unused chunks go back to the device: at synchronisation points
//    (TrimPoolsAtSynchronize) while the pool reserves more than its release threshold (default
//    0), through cuMemPoolTrimTo, when the pool is destroyed, and when an allocation would
//    otherwise fail with CUDA_ERROR_OUT_OF_MEMORY (unused chunks of the device's pools in this
//    process are released and the allocation retried).
//  - A live allocation is registered with the driver as a range of kind kPool (size = bytes
//    asked for, pool = its pool, charged = 0: the device charge belongs to the pool's chunk, so
//    summing ranges never counts pool memory twice). Driver::FreeDeviceMemory must not be used
//    on it; cuMemFree of a pool pointer goes through FreePoolAllocationNow (memory_pool.h).
#include "driver_api.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <utility>
#include <vector>

#include "driver_state.h"
#include "memory_pool.h"

namespace gpuslice::sim {
namespace {

constexpr uint64_t kChunkGranularity = 2ULL << 20;

struct Chunk {
  uint64_t size = 0;
};

struct Segment {
  uint64_t size = 0;
  CUdeviceptr chunk = 0;  // base of the chunk it belongs to
  bool free = true;
};

}  // namespace
}  // namespace gpuslice::sim

struct CUmemPoolHandle_st {
  gpuslice::sim::Driver* driver = nullptr;
  int device = 0;
  bool is_default = false;
  CUmemPoolProps props{};

  std::mutex mutex;
  // Attributes.
  uint64_t release_threshold = 0;
  int reuse_follow_event_dependencies = 1;
  int reuse_allow_opportunistic = 1;
  int reuse_allow_internal_dependencies = 1;
  // Accounting: reserved = sum of chunk sizes; used = sum of the segments handed out.
  uint64_t reserved = 0;
  uint64_t reserved_high = 0;
  uint64_t used = 0;
  uint64_t used_high = 0;
  std::map<CUdeviceptr, gpuslice::sim::Chunk> chunks;        // by base address
  std::map<CUdeviceptr, gpuslice::sim::Segment> segments;    // every segment of every chunk
  std::set<std::pair<uint64_t, CUdeviceptr>> free_segments;  // (size, address): best fit
  uint64_t outstanding = 0;  // allocations not yet returned (a pending async free included)
  bool destroyed = false;    // cuMemPoolDestroy was called; deleted once outstanding is 0
};

namespace gpuslice::sim {
namespace {

using Pool = CUmemPoolHandle_st;

// ---- Per-process registry of pools (reset when the driver is re-initialised after fork) ----

struct Registry {
  Driver* driver = nullptr;
  std::vector<Pool*> pools;  // live pools (not destroyed), default pools included
  Pool* default_pool[kMaxDevices] = {};
  Pool* current_pool[kMaxDevices] = {};  // nullptr: the default pool
};

std::mutex g_registry_mutex;  // lock order: g_registry_mutex, then a pool's mutex
Registry g_registry;

Registry& RegistryFor(Driver* d) {
  if (g_registry.driver != d) {
    // A fork child re-ran cuInit: the parent's pools are not this process's (they leak, as the
    // parent's driver object does).
    g_registry = Registry{};
    g_registry.driver = d;
  }
  return g_registry;
}

Pool* NewPool(Driver* d, int device, const CUmemPoolProps& props, bool is_default) {
  auto* pool = new Pool();
  pool->driver = d;
  pool->device = device;
  pool->is_default = is_default;
  pool->props = props;
  d->Register(pool);
  return pool;
}

Pool* DefaultPoolLocked(Driver* d, int device) {
  Registry& r = RegistryFor(d);
  if (!r.default_pool[device]) {
    CUmemPoolProps props{};
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.handleTypes = CU_MEM_HANDLE_TYPE_NONE;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = device;
    r.default_pool[device] = NewPool(d, device, props, true);
    r.pools.push_back(r.default_pool[device]);
  }
  return r.default_pool[device];
}

Pool* CurrentPoolLocked(Driver* d, int device) {
  Registry& r = RegistryFor(d);
  return r.current_pool[device] ? r.current_pool[device] : DefaultPoolLocked(d, device);
}

// A live (registered, not destroyed) pool of this process.
bool ValidPool(Driver* d, CUmemoryPool pool) { return pool && d->IsRegistered(pool); }

// ---- Chunk and segment bookkeeping; every function below runs with pool->mutex held ----

void InsertFreeSegment(Pool* pool, CUdeviceptr addr, uint64_t size, CUdeviceptr chunk) {
  pool->segments[addr] = Segment{size, chunk, true};
  pool->free_segments.insert({size, addr});
}

// Best fit: the smallest free segment of at least `bytes`, split if larger. 0: none fits.
CUdeviceptr TakeSegment(Pool* pool, uint64_t bytes) {
  auto it = pool->free_segments.lower_bound({bytes, 0});
  if (it == pool->free_segments.end()) return 0;
  const CUdeviceptr addr = it->second;
  pool->free_segments.erase(it);
  Segment& seg = pool->segments[addr];
  if (seg.size > bytes) {
    InsertFreeSegment(pool, addr + bytes, seg.size - bytes, seg.chunk);
    seg.size = bytes;
  }
  seg.free = false;
  return addr;
}

// Marks the segment at `addr` free again and merges it with free neighbours of its chunk.
// Returns the segment's size.
uint64_t ReturnSegment(Pool* pool, CUdeviceptr addr) {
  auto it = pool->segments.find(addr);
  const uint64_t returned = it->second.size;
  it->second.free = true;
  auto next = std::next(it);
  if (next != pool->segments.end() && next->second.free && next->second.chunk == it->second.chunk) {
    pool->free_segments.erase({next->second.size, next->first});
    it->second.size += next->second.size;
    pool->segments.erase(next);
  }
  if (it != pool->segments.begin()) {
    auto prev = std::prev(it);
    if (prev->second.free && prev->second.chunk == it->second.chunk) {
      pool->free_segments.erase({prev->second.size, prev->first});
      prev->second.size += it->second.size;
      pool->segments.erase(it);
      it = prev;
    }
  }
  pool->free_segments.insert({it->second.size, it->first});
  return returned;
}

// Adds a chunk that holds at least `bytes`, charging it to the device.
CUresult GrowPool(Pool* pool, uint64_t bytes) {
  const uint64_t size = (bytes + kChunkGranularity - 1) / kChunkGranularity * kChunkGranularity;
  if (pool->props.maxSize && pool->reserved + size > pool->props.maxSize) return CUDA_ERROR_OUT_OF_MEMORY;
  if (pool->driver->ChargeDevice(pool->device, size) != CUDA_SUCCESS) return CUDA_ERROR_OUT_OF_MEMORY;
  // Lazily committed host memory backs the chunk: reserving costs nothing until written.
  void* base = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (base == MAP_FAILED) {
    pool->driver->CreditDevice(pool->device, size);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  const auto addr = reinterpret_cast<CUdeviceptr>(base);
  pool->chunks[addr] = Chunk{size};
  InsertFreeSegment(pool, addr, size, addr);
  pool->reserved += size;
  pool->reserved_high = std::max(pool->reserved_high, pool->reserved);
  return CUDA_SUCCESS;
}

// Releases entirely unused chunks back to the device while the pool reserves more than `keep`.
void ReleaseUnusedChunks(Pool* pool, uint64_t keep) {
  for (auto it = pool->chunks.begin(); it != pool->chunks.end() && pool->reserved > keep;) {
    const CUdeviceptr base = it->first;
    const uint64_t size = it->second.size;
    auto seg = pool->segments.find(base);
    if (seg == pool->segments.end() || !seg->second.free || seg->second.size != size) {
      ++it;
      continue;
    }
    pool->free_segments.erase({size, base});
    pool->segments.erase(seg);
    munmap(reinterpret_cast<void*>(base), size);
    pool->driver->CreditDevice(pool->device, size);
    pool->reserved -= size;
    it = pool->chunks.erase(it);
  }
}

// Releases every unused chunk of every pool of `device` (the OUT_OF_MEMORY fallback).
void ReleaseUnusedOnDevice(Driver* d, int device) {
  std::lock_guard<std::mutex> registry_lock(g_registry_mutex);
  for (Pool* pool : RegistryFor(d).pools) {
    if (pool->device != device) continue;
    std::lock_guard<std::mutex> lock(pool->mutex);
    ReleaseUnusedChunks(pool, 0);
  }
}

// Takes `bytes` (rounded) from the pool, growing it when nothing free fits.
CUresult AllocateFromPool(Pool* pool, size_t bytes, CUdeviceptr* out) {
  const uint64_t rounded = ChargedBytes(bytes);
  std::unique_lock<std::mutex> lock(pool->mutex);
  CUdeviceptr addr = TakeSegment(pool, rounded);
  if (!addr) {
    CUresult rc = GrowPool(pool, rounded);
    if (rc == CUDA_ERROR_OUT_OF_MEMORY) {
      // The real driver gives unused pool memory back before failing an allocation.
      ReleaseUnusedChunks(pool, 0);
      rc = GrowPool(pool, rounded);
    }
    if (rc == CUDA_ERROR_OUT_OF_MEMORY) {
      lock.unlock();
      ReleaseUnusedOnDevice(pool->driver, pool->device);
      lock.lock();
      addr = TakeSegment(pool, rounded);  // another thread may have freed meanwhile
      if (!addr) rc = GrowPool(pool, rounded);
    }
    if (!addr) {
      if (rc != CUDA_SUCCESS) return rc;
      addr = TakeSegment(pool, rounded);
    }
  }
  pool->used += rounded;
  pool->used_high = std::max(pool->used_high, pool->used);
  ++pool->outstanding;
  lock.unlock();

  Allocation a;
  a.base = addr;
  a.size = bytes;
  a.charged = 0;  // charged through the chunk (RESERVED), not per allocation
  a.device = pool->device;
  a.kind = AllocationKind::kPool;
  a.pool = pool;
  pool->driver->AddRange(a);
  *out = addr;
  return CUDA_SUCCESS;
}

// Returns an allocation (whose range is already removed) to its pool. A destroyed pool gives
// its unused chunks back at once and is deleted with its last allocation.
void ReturnToPool(Pool* pool, CUdeviceptr addr) {
  std::unique_lock<std::mutex> lock(pool->mutex);
  pool->used -= ReturnSegment(pool, addr);
  --pool->outstanding;
  if (!pool->destroyed) return;
  ReleaseUnusedChunks(pool, 0);
  if (pool->outstanding != 0) return;
  lock.unlock();
  delete pool;
}

// Removes the range of the pool allocation that starts at `ptr` (claiming it: a second free
// of the same pointer fails). nullptr when `ptr` is not a live pool allocation.
Pool* ClaimPoolAllocation(Driver* d, CUdeviceptr ptr) {
  Allocation a;
  if (!ptr || !d->FindRange(ptr, 0, &a) || a.base != ptr || a.kind != AllocationKind::kPool || !a.pool) return nullptr;
  if (!d->RemoveRange(ptr, nullptr)) return nullptr;
  return a.pool;
}

// ---- Entry-point bodies ----

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
    std::lock_guard<std::mutex> lock(g_registry_mutex);
    pool = CurrentPoolLocked(d, s->context->device);
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

void TrimPoolsAtSynchronize(int device) {
  Driver* d = Driver::Get();
  if (!d) return;
  std::lock_guard<std::mutex> registry_lock(g_registry_mutex);
  for (Pool* pool : RegistryFor(d).pools) {
    if (pool->device != device) continue;
    std::lock_guard<std::mutex> lock(pool->mutex);
    if (pool->reserved > pool->release_threshold) ReleaseUnusedChunks(pool, pool->release_threshold);
  }
}

CUresult FreePoolAllocationNow(CUdeviceptr ptr) {
  Driver* d = nullptr;
  if (CUresult rc = RequireInit(&d); rc != CUDA_SUCCESS) return rc;
  Pool* pool = ClaimPoolAllocation(d, ptr);
  if (!pool) return CUDA_ERROR_INVALID_VALUE;
  ReturnToPool(pool, ptr);
  return CUDA_SUCCESS;
}

}  // namespace gpuslice::sim

using namespace gpuslice::sim;

// ---- Pools of a device ----

CUresult CUDAAPI cuDeviceGetDefaultMemPool(CUmemoryPool* pool_out, CUdevice dev) try {
  GPUSLICE_SIM_ENTRY();
  Driver* d = nullptr;
  if (CUresult rc = RequireDevice(&d, dev); rc != CUDA_SUCCESS) return rc;
  if (!pool_out) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(g_registry_mutex);
  *pool_out = DefaultPoolLocked(d, dev);
  return CUDA_SUCCESS;
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuDeviceGetMemPool(CUmemoryPool* pool, CUdevice dev) try {
  GPUSLICE_SIM_ENTRY();
  Driver* d = nullptr;
  if (CUresult rc = RequireDevice(&d, dev); rc != CUDA_SUCCESS) return rc;
  if (!pool) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(g_registry_mutex);
  *pool = CurrentPoolLocked(d, dev);
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
  std::lock_guard<std::mutex> lock(g_registry_mutex);
  RegistryFor(d).current_pool[dev] = pool->is_default ? nullptr : pool;
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
  std::lock_guard<std::mutex> lock(g_registry_mutex);
  Pool* p = NewPool(d, poolProps->location.id, *poolProps, false);
  RegistryFor(d).pools.push_back(p);
  *pool = p;
  return CUDA_SUCCESS;
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuMemPoolDestroy(CUmemoryPool pool) try {
  GPUSLICE_SIM_ENTRY();
  Driver* d = nullptr;
  if (CUresult rc = RequireInit(&d); rc != CUDA_SUCCESS) return rc;
  if (!ValidPool(d, pool) || pool->is_default) return CUDA_ERROR_INVALID_VALUE;
  {
    std::lock_guard<std::mutex> registry_lock(g_registry_mutex);
    Registry& r = RegistryFor(d);
    r.pools.erase(std::remove(r.pools.begin(), r.pools.end(), pool), r.pools.end());
    // Destroying a device's current pool makes the default pool current again.
    if (r.current_pool[pool->device] == pool) r.current_pool[pool->device] = nullptr;
  }
  d->Unregister(pool);
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

// ---- Stream-ordered allocation ----

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
