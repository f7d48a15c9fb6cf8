// The driver API as the simulated driver defines it: every exported name and signature from cuda.h.
#pragma once
#define __CUDA_API_VERSION_INTERNAL 1
#pragma GCC visibility push(default)
#include <cuda.h>
#pragma GCC visibility pop
#include <cudaTypedefs.h>

#include "sim/call_model.h"     // GPUSLICE_SIM_ENTRY, the first statement of every entry point
#include "sim/entry_failure.h"  // EntryFailed, the handler of every entry point

namespace gpuslice::sim {
template <>
inline CUresult EntryFailed<CUresult>(const char* entry) {
  switch (CurrentEntryFailure(entry)) {
    case EntryFailure::kOutOfMemory: return CUDA_ERROR_OUT_OF_MEMORY;
    case EntryFailure::kOperatingSystem: return CUDA_ERROR_OPERATING_SYSTEM;
    case EntryFailure::kOther: break;
  }
  return CUDA_ERROR_UNKNOWN;
}
}  // namespace gpuslice::sim

// The entry points are defined at global scope (extern "C"); their handlers name it unqualified.
using gpuslice::sim::EntryFailed;
