// How each GPU's memory is enforced, for `gpuslicectl status` (docs/accounting.md, "Three levels
// of enforcement"): by the preload alone (a driver without per-cgroup memory limits); by the
// preload with the driver's hard limits beneath it, on the tenant containers whose limits the
// node set (gpuslice-driver-limits' records in the state directory, each checked with the
// driver, so that "driver-enforced" is what the driver holds now); or, on a MIG instance, by the
// preload within the instance's hardware partition.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "broker/snapshot.h"
#include "ctl/mig_topology.h"

namespace gpuslice::ctl {

// The driver's limits on one tenant's containers, as the driver reports them.
struct DriverEnforced {
  uint64_t hard = 0;  // the tenant's limit
  uint64_t soft = 0;  // its request
  int containers = 0;
};

struct MemoryEnforcement {
  enum class Level {
    kUnknown,      // NVML cannot say (not loaded): nothing is shown
    kPreloadOnly,  // the driver has no per-cgroup memory limits
    kDriver,       // the driver has them: tenants in `driver_enforced` are held by both
    kMig,          // a MIG instance: the driver's limits do not cover MIG
  };
  Level level = Level::kUnknown;
  std::map<std::string, DriverEnforced> driver_enforced;  // by tenant name
};

// Keyed by the broker's GPU UUID.
using EnforcementByGpu = std::map<std::string, MemoryEnforcement>;

// `mig` (NVML's, ctl/mig_topology.h) tells which of the broker's GPUs are MIG instances.
EnforcementByGpu ReadMemoryEnforcement(const broker::Snapshot& snapshot, const std::string& state_dir,
                                       const MigTopology& mig);

// "memory: enforced by ...": one line for the GPU (empty for kUnknown).
std::string EnforcementLine(const MemoryEnforcement& enforcement);
// "driver-enforced: hard 4 GiB, soft 2 GiB (1 container)".
std::string DriverEnforcedText(const DriverEnforced& limits);
// "preload", "preload+driver", "preload (MIG)"; "" for kUnknown.
std::string LevelName(MemoryEnforcement::Level level);

}  // namespace gpuslice::ctl
