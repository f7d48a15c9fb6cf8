// Stream-ordered memory pools (pool_allocator.h, pool_registry.h): the hooks other API files call.
#pragma once

#include "driver_api.h"

namespace gpuslice::sim {

// Synchronisation points (cuStreamSynchronize, cuCtxSynchronize, cuEventSynchronize) call this
// after the wait: every pool of `device` that reserves more than its release threshold gives
// its unused memory back to the device, as the real driver does at these points.
void TrimPoolsAtSynchronize(int device);

// cuMemFree_v2 on a pointer from cuMemAllocAsync / cuMemAllocFromPoolAsync (a range of kind
// AllocationKind::kPool): returns it to its pool at once (no stream ordering), as the real
// driver allows. The pool keeps the memory reserved; Driver::FreeDeviceMemory must NOT be used
// on such a pointer (the block belongs to a larger pool reservation).
// CUDA_ERROR_INVALID_VALUE when `ptr` is not the start of a live pool allocation.
CUresult FreePoolAllocationNow(CUdeviceptr ptr);

}  // namespace gpuslice::sim
