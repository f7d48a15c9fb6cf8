// Warnings the shim gives once per GPU, when a process first uses it (ShimState::LedgerForDevice):
// configurations that run, but not as their author likely meant. Each is one line on stderr
// ("gpuslice: warning: ..."); the process goes on.
#pragma once

#include <cstdint>
#include <string>

#include "shim/options.h"

namespace gpuslice::shim {

// The line for a quota in bytes larger than the device it applies to (GPUSLICE_MEMORY_LIMIT=100Gi
// on a 16 GiB GPU: the quota never binds, the device's memory does), or "" when it fits. A
// percentage always fits. `ordinal` is the CUDA ordinal, or -1 for a GPU seen through NVML only.
std::string OversizedQuotaWarning(const ShimOptions& options, int ordinal, uint64_t device_total,
                                  const std::string& gpu_uuid);

// "16 GiB", "1.50 GiB", "512 MiB": how the shim's lines write a byte count.
std::string ShimBytes(uint64_t bytes);

}  // namespace gpuslice::shim
