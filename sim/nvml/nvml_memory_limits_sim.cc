// The simulated NVML's memory partitioning calls (driver r615 / CUDA 13.4): per-cgroup hard and
// soft limits of a whole GPU's memory, kept in the simulated GPUs' shared state, where the
// simulated driver enforces them (sim/memory_partitioning.h). Setting needs root, as NVIDIA's
// does; reading does not. A driver without partitioning, a MIG instance and a GPU in MIG mode
// answer NVML_ERROR_NOT_SUPPORTED.
#include <unistd.h>

// Exported with default visibility, as the other NVML files' (the version script exports nvml*).
#define NVML_NO_UNVERSIONED_FUNC_DEFS
#pragma GCC visibility push(default)
#include "common/nvml_api.h"
#pragma GCC visibility pop

#include "sim/call_model.h"
#include "sim/memory_partitioning.h"
#include "sim/nvml/nvml_entry.h"  // after nvml_api.h, whose types it names
#include "sim/nvml/nvml_sim_devices.h"

using gpuslice::sim::SimState;
using gpuslice::sim::nvml::WithUnit;

extern "C" {

nvmlReturn_t nvmlDeviceSetMemoryLimits_v1(nvmlDevice_t device, nvmlSetMemoryLimits_v1_t* limits) try {
  GPUSLICE_SIM_ENTRY();
  if (limits == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  return static_cast<nvmlReturn_t>(WithUnit(device, [&](SimState& state, int unit) {
    return gpuslice::sim::SetCgroupLimits(state, unit, limits->nameSpace, limits->softLimit, limits->hardLimit,
                                          geteuid() == 0);
  }));
} catch (...) {
  return EntryFailed<nvmlReturn_t>(__func__);
}

nvmlReturn_t nvmlDeviceGetMemoryLimits_v1(nvmlDevice_t device, nvmlGetMemoryLimits_v1_t* limits) try {
  GPUSLICE_SIM_ENTRY();
  if (limits == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  return static_cast<nvmlReturn_t>(WithUnit(device, [&](SimState& state, int unit) {
    uint64_t soft = 0, hard = 0, used = 0;
    const int rc = gpuslice::sim::GetCgroupLimits(state, unit, limits->nameSpace, &soft, &hard, &used);
    if (rc == NVML_SUCCESS) {
      limits->softLimit = soft;
      limits->hardLimit = hard;
      limits->currentUsed = used;
    }
    return rc;
  }));
} catch (...) {
  return EntryFailed<nvmlReturn_t>(__func__);
}

}  // extern "C"
