// NVML as gpuslice's tools load it (the device plugin, the exporter, gpuslicectl): at run time,
// never linked, so that a node without the NVIDIA driver still runs them and they can say why
// there is no GPU. Each tool binds the entry points it needs and words its own errors.
#pragma once

#include <dlfcn.h>

#include <string>
#include <type_traits>

#include "common/nvml_api.h"
#include "common/status.h"

namespace gpuslice::nvml {

// NVML's MIG queries, with nvml.h's signatures. Not in common/nvml_api.h, the subset the shim
// intercepts; a driver without them has no MIG.
using GetMigModeFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int* current, unsigned int* pending);
using GetMaxMigDeviceCountFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int* count);
using GetMigDeviceHandleByIndexFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int index, nvmlDevice_t* mig);
inline constexpr unsigned int kMigEnabled = 1;  // NVML_DEVICE_MIG_ENABLE
// nvmlDeviceGetCpuAffinityWithinScope (R470+): with scope kAffinityScopeNode, a bit mask of the
// NUMA nodes the GPU is closest to (what a kubelet's topology manager aligns CPUs with).
using GetCpuAffinityWithinScopeFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int node_set_size, unsigned long* node_set,
                                                     unsigned int scope);
inline constexpr unsigned int kAffinityScopeNode = 0;  // NVML_AFFINITY_SCOPE_NODE

// The library at `path` (by default the driver's soname), loaded for good: NVML keeps threads of
// its own on a real driver, so it is never closed. An error whose message is the loader's reason
// when it cannot be loaded.
inline Result<void*> Open(const std::string& path) {
  void* library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* reason = dlerror();
    return Status::Error(reason != nullptr ? reason : "unknown error");
  }
  return library;
}
inline constexpr const char* kLibrary = "libnvidia-ml.so.1";

// The entry point `name` of `library` as a pointer of type F; null when the library lacks it.
template <typename F>
F Symbol(void* library, const char* name) {
  return reinterpret_cast<F>(dlsym(library, name));
}

// The entry points every tool that lists devices needs: start and stop NVML, count the devices,
// and read one's UUID, name and memory. Bind resolves all seven and answers the name of the
// first the library lacks (null when it has them all); which are required is the caller's call.
struct DeviceQueries {
  decltype(&nvmlInit_v2) init = nullptr;
  decltype(&nvmlShutdown) shutdown = nullptr;
  decltype(&nvmlDeviceGetCount_v2) count = nullptr;
  decltype(&nvmlDeviceGetHandleByIndex_v2) handle_by_index = nullptr;
  decltype(&nvmlDeviceGetUUID) uuid = nullptr;
  decltype(&nvmlDeviceGetName) name = nullptr;
  decltype(&nvmlDeviceGetMemoryInfo) memory = nullptr;

  const char* Bind(void* library) {
    const char* missing = nullptr;
    auto bind = [&](auto* fn, const char* symbol) {
      *fn = Symbol<std::remove_reference_t<decltype(*fn)>>(library, symbol);
      if (*fn == nullptr && missing == nullptr) missing = symbol;
    };
    bind(&init, "nvmlInit_v2");
    bind(&shutdown, "nvmlShutdown");
    bind(&count, "nvmlDeviceGetCount_v2");
    bind(&handle_by_index, "nvmlDeviceGetHandleByIndex_v2");
    bind(&uuid, "nvmlDeviceGetUUID");
    bind(&name, "nvmlDeviceGetName");
    bind(&memory, "nvmlDeviceGetMemoryInfo");
    return missing;
  }
};

}  // namespace gpuslice::nvml
