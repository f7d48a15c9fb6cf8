// The error codes an NVML entry point of the simulated library returns when its body throws
// (sim/entry_failure.h). Included after common/nvml_api.h, which the including file includes
// with the visibility its exports need: this header declares no NVML name of its own.
#pragma once

#include "sim/entry_failure.h"

namespace gpuslice::sim {

template <>
inline nvmlReturn_t EntryFailed<nvmlReturn_t>(const char* entry) {
  return CurrentEntryFailure(entry) == EntryFailure::kOutOfMemory ? NVML_ERROR_MEMORY : NVML_ERROR_UNKNOWN;
}

// nvmlErrorString cannot say it failed: it names the failure instead.
template <>
inline const char* EntryFailed<const char*>(const char* entry) {
  return CurrentEntryFailure(entry) == EntryFailure::kOutOfMemory ? "Insufficient Memory" : "Unknown Error";
}

}  // namespace gpuslice::sim

// The entry points are defined at global scope (extern "C"); their handlers name it unqualified.
using gpuslice::sim::EntryFailed;
