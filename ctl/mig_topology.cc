#include "ctl/mig_topology.h"

#include "common/nvml_loader.h"

namespace gpuslice::ctl {
namespace {

std::string Text(decltype(&nvmlDeviceGetUUID) get, nvmlDevice_t device) {
  char text[NVML_DEVICE_NAME_V2_BUFFER_SIZE] = {};
  return get(device, text, sizeof text) == NVML_SUCCESS ? std::string(text) : std::string();
}

}  // namespace

std::string UuidKey(const std::string& uuid) { return uuid.size() > 4 ? uuid.substr(4) : uuid; }

MigTopology ReadMigTopology() {
  MigTopology topology;
  const Result<void*> opened = nvml::Open(nvml::kLibrary);
  if (!opened.ok()) return topology;  // no NVML: no MIG instances to name
  void* library = *opened;
  const auto init = nvml::Symbol<decltype(&nvmlInit_v2)>(library, "nvmlInit_v2");
  const auto count = nvml::Symbol<decltype(&nvmlDeviceGetCount_v2)>(library, "nvmlDeviceGetCount_v2");
  const auto handle = nvml::Symbol<decltype(&nvmlDeviceGetHandleByIndex_v2)>(library, "nvmlDeviceGetHandleByIndex_v2");
  const auto uuid = nvml::Symbol<decltype(&nvmlDeviceGetUUID)>(library, "nvmlDeviceGetUUID");
  const auto name = nvml::Symbol<decltype(&nvmlDeviceGetName)>(library, "nvmlDeviceGetName");
  const auto mig_mode = nvml::Symbol<nvml::GetMigModeFn>(library, "nvmlDeviceGetMigMode");
  const auto max_mig = nvml::Symbol<nvml::GetMaxMigDeviceCountFn>(library, "nvmlDeviceGetMaxMigDeviceCount");
  const auto mig_handle =
      nvml::Symbol<nvml::GetMigDeviceHandleByIndexFn>(library, "nvmlDeviceGetMigDeviceHandleByIndex");
  if (!init || !count || !handle || !uuid || !name || !mig_mode || !max_mig || !mig_handle) return topology;
  if (init() != NVML_SUCCESS) return topology;
  unsigned int gpus = 0;
  if (count(&gpus) != NVML_SUCCESS) return topology;
  for (unsigned int i = 0; i < gpus; ++i) {
    nvmlDevice_t gpu = nullptr;
    unsigned int current = 0, pending = 0, slots = 0;
    if (handle(i, &gpu) != NVML_SUCCESS || mig_mode(gpu, &current, &pending) != NVML_SUCCESS ||
        current != nvml::kMigEnabled || max_mig(gpu, &slots) != NVML_SUCCESS)
      continue;
    const std::string gpu_uuid = Text(uuid, gpu), gpu_name = Text(name, gpu);
    for (unsigned int k = 0; k < slots; ++k) {
      nvmlDevice_t instance = nullptr;
      if (mig_handle(gpu, k, &instance) != NVML_SUCCESS) continue;  // an empty slot
      MigInstanceInfo info;
      info.uuid = Text(uuid, instance);
      // NVML names an instance "<GPU name> MIG <profile>"; a profile is one word, and whatever
      // follows it (a simulated device's " (simulated)") is not part of it.
      const std::string instance_name = Text(name, instance);
      const size_t at = instance_name.rfind(" MIG ");
      info.profile = at == std::string::npos ? instance_name : instance_name.substr(at + 5);
      info.profile = info.profile.substr(0, info.profile.find(' '));
      info.gpu_index = static_cast<int>(i);
      info.gpu_uuid = gpu_uuid;
      info.gpu_name = gpu_name;
      if (!info.uuid.empty()) topology[UuidKey(info.uuid)] = info;
    }
  }
  return topology;
}

}  // namespace gpuslice::ctl
