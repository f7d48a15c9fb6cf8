// Which GPU each MIG instance belongs to, from NVML, for `gpuslicectl status`. The broker keys a
// GPU by the 16 bytes of the UUID CUDA reports, which inside a MIG instance are the instance's:
// only NVML knows the instance's profile and parent GPU. NVML is optional here: without it (no
// driver, or a node without MIG) the map is empty and status shows what the broker holds.
#pragma once

#include <map>
#include <string>

namespace gpuslice::ctl {

struct MigInstanceInfo {
  std::string uuid;      // "MIG-..."
  std::string profile;   // "3g.71gb"
  int gpu_index = 0;     // its GPU's NVML index
  std::string gpu_uuid;  // "GPU-..."
  std::string gpu_name;
};

// Keyed by the UUID's 36 characters after its "GPU-"/"MIG-" prefix (lower-case hex and dashes),
// the form the broker's "GPU-..." and NVML's "MIG-..." share.
using MigTopology = std::map<std::string, MigInstanceInfo>;

// Every MIG instance of every GPU NVML lists (gpu/gpu_inventory.h); empty when NVML
// cannot be loaded or no GPU is in MIG mode.
MigTopology ReadMigTopology();

// The key of a "GPU-..." or "MIG-..." UUID.
std::string UuidKey(const std::string& uuid);

}  // namespace gpuslice::ctl
