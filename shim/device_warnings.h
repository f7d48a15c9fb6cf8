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

// What a process sees of one GPU's memory when it first uses it: the real driver's free and total
// (cuMemGetInfo, not the slice the shim reports), what the state directory's tenants hold on it
// together, and what this process's tenant holds and may hold.
struct DeviceMemorySeen {
  std::string gpu_uuid;
  uint64_t device_free = 0, device_total = 0;
  uint64_t accounted = 0;  // every tenant of the state directory (Broker::GpuUsed)
  uint64_t processes = 1;  // the state directory's live processes on the GPU (Broker::GpuProcesses)
  uint64_t tenant_used = 0;
  uint64_t tenant_quota = 0;  // broker::kUnlimited: none
  std::string tenant;         // "" for a process that is a tenant of its own
  std::string state_dir;
};

// The line for a GPU with less memory free than the tenant may still take (its quota, or the
// device, less what it holds) while the device has more in use than the state directory accounts
// for (beyond driver-internal memory: broker/unaccounted.h), or "" otherwise: another state
// directory's tenants or processes not under gpuslice hold the rest, and an allocation within the
// quota will fail with out-of-memory.
std::string UnaccountedMemoryWarning(const DeviceMemorySeen& seen);

// "16 GiB", "1.50 GiB", "512 MiB": how the shim's lines write a byte count.
std::string ShimBytes(uint64_t bytes);

}  // namespace gpuslice::shim
