// NVML as gpuslice's tools load it (the device plugin, the DRA driver, the exporter,
// gpuslicectl, the driver-limits hook): at run time, never linked, so that a node without the NVIDIA driver still runs
// them and they can say why there is no GPU. The one place that loads libnvidia-ml and binds its
// entry points; gpu/gpu_inventory.h and gpu/nvml_devices.h read the devices through it.
#pragma once

#include <memory>
#include <string>

#include "common/nvml_api.h"
#include "common/nvml_events.h"
#include "common/status.h"

namespace gpuslice::gpu {

// The driver's NVML, by the name the loader searches for.
inline constexpr const char* kNvmlLibrary = "libnvidia-ml.so.1";

// NVML's MIG and topology queries, with nvml.h's signatures. Not in common/nvml_api.h, the
// subset the shim intercepts.
using GetMigModeFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int* current, unsigned int* pending);
using GetMaxMigDeviceCountFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int* count);
using GetMigDeviceHandleByIndexFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int index, nvmlDevice_t* mig);
inline constexpr unsigned int kMigEnabled = 1;  // NVML_DEVICE_MIG_ENABLE
// nvmlDeviceGetCpuAffinityWithinScope (R470+): with scope kAffinityScopeNode, a bit mask of the
// NUMA nodes the GPU is closest to (what a kubelet's topology manager aligns CPUs with).
using GetCpuAffinityWithinScopeFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int node_set_size, unsigned long* node_set,
                                                     unsigned int scope);
inline constexpr unsigned int kAffinityScopeNode = 0;  // NVML_AFFINITY_SCOPE_NODE

// The library's entry points, bound once by Open and constant after.
struct NvmlLibrary {
  // Required: every tool that lists devices calls them (R450 and later have them all).
  decltype(&nvmlInit_v2) init = nullptr;
  decltype(&nvmlShutdown) shutdown = nullptr;
  decltype(&nvmlErrorString) error_string = nullptr;
  decltype(&nvmlDeviceGetCount_v2) count = nullptr;
  decltype(&nvmlDeviceGetHandleByIndex_v2) handle_by_index = nullptr;
  decltype(&nvmlDeviceGetUUID) uuid = nullptr;
  decltype(&nvmlDeviceGetName) name = nullptr;
  decltype(&nvmlDeviceGetMemoryInfo) memory = nullptr;
  // Optional, null when the library lacks them: a driver without the MIG queries has no MIG,
  // one without the affinity query advertises no topology, and the figures, the driver's
  // version and XID events are left out where their calls are missing.
  GetMigModeFn mig_mode = nullptr;
  GetMaxMigDeviceCountFn max_mig_count = nullptr;
  GetMigDeviceHandleByIndexFn mig_by_index = nullptr;
  GetCpuAffinityWithinScopeFn affinity = nullptr;
  decltype(&nvmlDeviceGetUtilizationRates) utilization = nullptr;
  decltype(&nvmlDeviceGetComputeRunningProcesses_v3) processes = nullptr;
  decltype(&nvmlSystemGetDriverVersion) driver_version = nullptr;
  decltype(&nvmlEventSetCreate) event_set_create = nullptr;
  decltype(&nvmlDeviceRegisterEvents) register_events = nullptr;
  decltype(&nvmlEventSetWait_v2) event_set_wait = nullptr;
  decltype(&nvmlEventSetFree) event_set_free = nullptr;
  // The driver's per-cgroup memory limits (r615 and later; driverlimits/) and the lookup by UUID
  // they go with.
  decltype(&nvmlDeviceGetHandleByUUID) handle_by_uuid = nullptr;
  decltype(&nvmlDeviceSetMemoryLimits_v1) set_memory_limits = nullptr;
  decltype(&nvmlDeviceGetMemoryLimits_v1) get_memory_limits = nullptr;

  bool HasMig() const { return mig_mode && max_mig_count && mig_by_index; }
  bool HasEvents() const { return event_set_create && register_events && event_set_wait && event_set_free; }
  // "nvmlDeviceGetUUID failed: GPU is lost".
  std::string CallFailed(const char* call, nvmlReturn_t result) const;

  // Loads `path` (a file name the loader searches for, or a path) for good: NVML keeps threads
  // of its own on a real driver, so it is never closed. A NotFound error with one line when it
  // cannot be loaded or lacks a required entry point. Does not initialise NVML.
  static Result<std::unique_ptr<const NvmlLibrary>> Open(const std::string& path);
};

}  // namespace gpuslice::gpu
