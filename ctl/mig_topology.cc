#include "ctl/mig_topology.h"

#include <dlfcn.h>

#include "common/nvml_api.h"

namespace gpuslice::ctl {
namespace {

// NVML's MIG queries (nvml.h; not in common/nvml_api.h, which holds what the exporter and shim use).
using GetMigMode = nvmlReturn_t (*)(nvmlDevice_t, unsigned int*, unsigned int*);
using GetMaxMigDeviceCount = nvmlReturn_t (*)(nvmlDevice_t, unsigned int*);
using GetMigDeviceHandleByIndex = nvmlReturn_t (*)(nvmlDevice_t, unsigned int, nvmlDevice_t*);
constexpr unsigned int kMigEnabled = 1;  // NVML_DEVICE_MIG_ENABLE

template <typename F>
F Bind(void* library, const char* name) {
  return reinterpret_cast<F>(dlsym(library, name));
}

std::string Text(decltype(&nvmlDeviceGetUUID) get, nvmlDevice_t device) {
  char text[NVML_DEVICE_NAME_V2_BUFFER_SIZE] = {};
  return get(device, text, sizeof text) == NVML_SUCCESS ? std::string(text) : std::string();
}

}  // namespace

std::string UuidKey(const std::string& uuid) { return uuid.size() > 4 ? uuid.substr(4) : uuid; }

MigTopology ReadMigTopology() {
  MigTopology topology;
  // Never dlclose: NVML keeps threads of its own on a real driver.
  void* library = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!library) return topology;
  const auto init = Bind<decltype(&nvmlInit_v2)>(library, "nvmlInit_v2");
  const auto count = Bind<decltype(&nvmlDeviceGetCount_v2)>(library, "nvmlDeviceGetCount_v2");
  const auto handle = Bind<decltype(&nvmlDeviceGetHandleByIndex_v2)>(library, "nvmlDeviceGetHandleByIndex_v2");
  const auto uuid = Bind<decltype(&nvmlDeviceGetUUID)>(library, "nvmlDeviceGetUUID");
  const auto name = Bind<decltype(&nvmlDeviceGetName)>(library, "nvmlDeviceGetName");
  const auto mig_mode = Bind<GetMigMode>(library, "nvmlDeviceGetMigMode");
  const auto max_mig = Bind<GetMaxMigDeviceCount>(library, "nvmlDeviceGetMaxMigDeviceCount");
  const auto mig_handle = Bind<GetMigDeviceHandleByIndex>(library, "nvmlDeviceGetMigDeviceHandleByIndex");
  if (!init || !count || !handle || !uuid || !name || !mig_mode || !max_mig || !mig_handle) return topology;
  if (init() != NVML_SUCCESS) return topology;
  unsigned int gpus = 0;
  if (count(&gpus) != NVML_SUCCESS) return topology;
  for (unsigned int i = 0; i < gpus; ++i) {
    nvmlDevice_t gpu = nullptr;
    unsigned int current = 0, pending = 0, slots = 0;
    if (handle(i, &gpu) != NVML_SUCCESS || mig_mode(gpu, &current, &pending) != NVML_SUCCESS ||
        current != kMigEnabled || max_mig(gpu, &slots) != NVML_SUCCESS)
      continue;
    const std::string gpu_uuid = Text(uuid, gpu), gpu_name = Text(name, gpu);
    for (unsigned int k = 0; k < slots; ++k) {
      nvmlDevice_t instance = nullptr;
      if (mig_handle(gpu, k, &instance) != NVML_SUCCESS) continue;  // an empty slot
      MigInstanceInfo info;
      info.uuid = Text(uuid, instance);
      // NVML names an instance "<GPU name> MIG <profile>".
      const std::string instance_name = Text(name, instance);
      const size_t at = instance_name.rfind(" MIG ");
      info.profile = at == std::string::npos ? instance_name : instance_name.substr(at + 5);
      info.gpu_index = static_cast<int>(i);
      info.gpu_uuid = gpu_uuid;
      info.gpu_name = gpu_name;
      if (!info.uuid.empty()) topology[UuidKey(info.uuid)] = info;
    }
  }
  return topology;
}

}  // namespace gpuslice::ctl
