#include "pool_allocator.h"

#include <sys/mman.h>

#include <algorithm>
#include <iterator>

#include "driver_state.h"
#include "memory_pool.h"
#include "pool_registry.h"

namespace gpuslice::sim {
namespace {

constexpr uint64_t kChunkGranularity = 2ULL << 20;

// ---- Chunk and segment bookkeeping; every function below runs with pool->mutex held ----

void InsertFreeSegment(Pool* pool, CUdeviceptr addr, uint64_t size, CUdeviceptr chunk) {
  pool->segments[addr] = PoolSegment{size, chunk, true};
  pool->free_segments.insert({size, addr});
}

// Best fit: the smallest free segment of at least `bytes`, split if larger. 0: none fits.
CUdeviceptr TakeSegment(Pool* pool, uint64_t bytes) {
  auto it = pool->free_segments.lower_bound({bytes, 0});
  if (it == pool->free_segments.end()) return 0;
  const CUdeviceptr addr = it->second;
  pool->free_segments.erase(it);
  PoolSegment& seg = pool->segments[addr];
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
  pool->chunks[addr] = PoolChunk{size};
  InsertFreeSegment(pool, addr, size, addr);
  pool->reserved += size;
  pool->reserved_high = std::max(pool->reserved_high, pool->reserved);
  return CUDA_SUCCESS;
}

}  // namespace

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

Pool* ClaimPoolAllocation(Driver* d, CUdeviceptr ptr) {
  Allocation a;
  if (!ptr || !d->FindRange(ptr, 0, &a) || a.base != ptr || a.kind != AllocationKind::kPool || !a.pool) return nullptr;
  if (!d->RemoveRange(ptr, nullptr)) return nullptr;
  return a.pool;
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
