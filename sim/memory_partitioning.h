// MPS v3 memory partitioning as NVIDIA documents it for driver r615 / CUDA 13.4: per-cgroup hard
// and soft limits of device memory, set with NVML (nvmlDeviceSetMemoryLimits_v1, privileged) on a
// cgroup path ("/sys/fs/cgroup/..."). The hard limit is enforced at allocation time against all
// the device memory the cgroup's processes hold (managed memory is not tracked; the simulator
// charges none), for the cgroup and its descendants, as the kernel's dmem controller does; the
// soft limit is only recorded (over it a process is an eviction candidate, which the simulator
// never evicts). cuMemGetInfo and NVML's memory info report the tightest hard limit as the total.
// Whole GPUs only: a MIG instance, or a GPU in MIG mode, is refused, its reporting unaltered.
// Off unless the simulated driver's branch has it (GPUSLICE_SIM_DRIVER_VERSION=615 or later).
//
// A process's cgroup is read from /proc/self/cgroup (the cgroup v2 line) when it registers.
// Every function here takes the state's table mutex, as memory charges do.
#pragma once

#include <cstdint>
#include <string>

#include "sim/sim_state.h"

namespace gpuslice::sim {

// The calling process's cgroup as NVML names it: "/sys/fs/cgroup" followed by the path of the
// "0::" line of /proc/self/cgroup; "" when it has none (no cgroup v2).
std::string OwnCgroupPath();

// The driver has memory partitioning.
bool HasMemoryPartitioning(const SimSegment& segment);

// What the tightest hard limit over `cgroup` on `unit` leaves: the limit itself (the total
// cuMemGetInfo reports) and what the cgroup may still allocate. UINT64_MAX for both when no
// limit applies.
struct CgroupRoom {
  uint64_t limit = UINT64_MAX;
  uint64_t left = UINT64_MAX;
};
// With the table mutex held.
CgroupRoom CgroupRoomLocked(SimState& state, int unit, const char* cgroup);
CgroupRoom CgroupRoomOf(SimState& state, int unit, const std::string& cgroup);

// NVML's two calls, as results of NVML's codes (nvmlReturn_t values: common/nvml_api.h).
// `privileged`: the caller may change limits (root).
int SetCgroupLimits(SimState& state, int unit, const char* cgroup, uint64_t soft, uint64_t hard, bool privileged);
int GetCgroupLimits(SimState& state, int unit, const char* cgroup, uint64_t* soft, uint64_t* hard, uint64_t* used);

}  // namespace gpuslice::sim
