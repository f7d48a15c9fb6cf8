#include "gpu/nvml_library.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <type_traits>

namespace gpuslice::gpu {

std::string NvmlLibrary::CallFailed(const char* call, nvmlReturn_t result) const {
  return fmt::format("{} failed: {}", call, error_string(result));
}

Result<std::unique_ptr<const NvmlLibrary>> NvmlLibrary::Open(const std::string& path) {
  void* library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* reason = dlerror();
    return Status::NotFound(fmt::format(
        "cannot load NVML from '{}' ({}); is the NVIDIA driver installed and the library on the loader path?", path,
        reason != nullptr ? reason : "unknown error"));
  }
  auto nvml = std::make_unique<NvmlLibrary>();
  const char* missing = nullptr;
  auto bind = [library](auto* fn, const char* symbol) {
    *fn = reinterpret_cast<std::remove_reference_t<decltype(*fn)>>(dlsym(library, symbol));
    return *fn != nullptr;
  };
  auto require = [&](auto* fn, const char* symbol) {
    if (!bind(fn, symbol) && missing == nullptr) missing = symbol;
  };
  require(&nvml->init, "nvmlInit_v2");
  require(&nvml->shutdown, "nvmlShutdown");
  require(&nvml->error_string, "nvmlErrorString");
  require(&nvml->count, "nvmlDeviceGetCount_v2");
  require(&nvml->handle_by_index, "nvmlDeviceGetHandleByIndex_v2");
  require(&nvml->uuid, "nvmlDeviceGetUUID");
  require(&nvml->name, "nvmlDeviceGetName");
  require(&nvml->memory, "nvmlDeviceGetMemoryInfo");
  if (missing != nullptr)
    return Status::NotFound(fmt::format("NVML has no {}; a driver of R450 or newer is needed", missing));
  bind(&nvml->mig_mode, "nvmlDeviceGetMigMode");
  bind(&nvml->max_mig_count, "nvmlDeviceGetMaxMigDeviceCount");
  bind(&nvml->mig_by_index, "nvmlDeviceGetMigDeviceHandleByIndex");
  bind(&nvml->affinity, "nvmlDeviceGetCpuAffinityWithinScope");
  bind(&nvml->utilization, "nvmlDeviceGetUtilizationRates");
  bind(&nvml->processes, "nvmlDeviceGetComputeRunningProcesses_v3");
  bind(&nvml->driver_version, "nvmlSystemGetDriverVersion");
  bind(&nvml->event_set_create, "nvmlEventSetCreate");
  bind(&nvml->register_events, "nvmlDeviceRegisterEvents");
  bind(&nvml->event_set_wait, "nvmlEventSetWait_v2");
  bind(&nvml->event_set_free, "nvmlEventSetFree");
  bind(&nvml->handle_by_uuid, "nvmlDeviceGetHandleByUUID");
  bind(&nvml->set_memory_limits, "nvmlDeviceSetMemoryLimits_v1");
  bind(&nvml->get_memory_limits, "nvmlDeviceGetMemoryLimits_v1");
  return std::unique_ptr<const NvmlLibrary>(std::move(nvml));
}

}  // namespace gpuslice::gpu
