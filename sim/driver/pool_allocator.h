// A stream-ordered memory pool (cuMemPoolCreate, a device's default pool) and how it hands out
// memory, as the real driver behaves. The entry points are api_memory_pool.cc's (pools and their
// attributes) and api_memory_async.cc's (cuMemAllocAsync, cuMemFreeAsync); the pools of a process
// are pool_registry.h's.
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
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <utility>

#include "driver_api.h"

namespace gpuslice::sim {

class Driver;

struct PoolChunk {
  uint64_t size = 0;
};

struct PoolSegment {
  uint64_t size = 0;
  CUdeviceptr chunk = 0;  // base of the chunk it belongs to
  bool free = true;
};

}  // namespace gpuslice::sim

// The pool behind a CUmemoryPool handle.
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
  std::map<CUdeviceptr, gpuslice::sim::PoolChunk> chunks;      // by base address
  std::map<CUdeviceptr, gpuslice::sim::PoolSegment> segments;  // every segment of every chunk
  std::set<std::pair<uint64_t, CUdeviceptr>> free_segments;    // (size, address): best fit
  uint64_t outstanding = 0;  // allocations not yet returned (a pending async free included)
  bool destroyed = false;    // cuMemPoolDestroy was called; deleted once outstanding is 0
};

namespace gpuslice::sim {

using Pool = CUmemPoolHandle_st;

// Releases entirely unused chunks back to the device while the pool reserves more than `keep`.
// With pool->mutex held.
void ReleaseUnusedChunks(Pool* pool, uint64_t keep);

// Takes `bytes` (rounded) from the pool, growing it when nothing free fits, and registers the
// allocation with the driver. CUDA_ERROR_OUT_OF_MEMORY when neither the pool nor the device
// (after releasing the unused chunks of its pools) has room.
CUresult AllocateFromPool(Pool* pool, size_t bytes, CUdeviceptr* out);

// Removes the range of the pool allocation that starts at `ptr` (claiming it: a second free
// of the same pointer fails). nullptr when `ptr` is not a live pool allocation.
Pool* ClaimPoolAllocation(Driver* d, CUdeviceptr ptr);

// Returns an allocation (whose range is already removed) to its pool. A destroyed pool gives
// its unused chunks back at once and is deleted with its last allocation.
void ReturnToPool(Pool* pool, CUdeviceptr addr);

}  // namespace gpuslice::sim
