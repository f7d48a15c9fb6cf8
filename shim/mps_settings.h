// Sharing mode `mps`: gpuslice does not gate launches and leaves the SMs to the MPS daemon, but
// hands the tenant's limits to MPS through its environment variables before the driver reads
// them (at the real cuInit): CUDA_MPS_ACTIVE_THREAD_PERCENTAGE from GPUSLICE_COMPUTE_LIMIT and
// CUDA_MPS_PINNED_DEVICE_MEM_LIMIT from the memory quota. Values the process already set win.
#pragma once

namespace gpuslice::shim {

class ShimState;

// Call before the real cuInit. Does nothing unless some GPU of the node is in mode mps.
void ApplyMpsSettings(ShimState* state);

}  // namespace gpuslice::shim
