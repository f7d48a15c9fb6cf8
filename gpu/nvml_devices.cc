#include "gpu/nvml_devices.h"

#include <string>
#include <vector>

#include "common/mutex_lock.h"

namespace gpuslice::gpu {

// Neither nvmlShutdown nor dlclose: other threads may still be reading at exit.
NvmlDevices::NvmlDevices() = default;
NvmlDevices::~NvmlDevices() = default;

Status NvmlDevices::Load() {
  if (!nvml_) {
    Result<std::unique_ptr<const NvmlLibrary>> opened = NvmlLibrary::Open(kNvmlLibrary);
    if (!opened.ok()) return opened.status();
    nvml_ = std::move(opened).value();
  }
  if (!initialised_) {
    const nvmlReturn_t rc = nvml_->init();
    if (rc != NVML_SUCCESS) return Status::Error(nvml_->CallFailed("nvmlInit", rc));
    initialised_ = true;
  }
  return Status::Ok();
}

Result<std::vector<DeviceFigures>> NvmlDevices::Read() {
  MutexLock lock(&mutex_);
  if (Status loaded = Load(); !loaded.ok()) return loaded;
  unsigned int count = 0;
  if (const nvmlReturn_t rc = nvml_->count(&count); rc != NVML_SUCCESS)
    return Status::Error(nvml_->CallFailed("nvmlDeviceGetCount", rc));
  std::vector<DeviceFigures> devices;
  for (unsigned int i = 0; i < count; ++i) {
    nvmlDevice_t device = nullptr;
    if (nvml_->handle_by_index(i, &device) != NVML_SUCCESS) continue;
    DeviceFigures figures;
    figures.index = static_cast<int>(i);
    char text[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
    if (nvml_->uuid(device, text, sizeof text) != NVML_SUCCESS) continue;
    figures.uuid = text;
    char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE] = {};
    if (nvml_->name(device, name, sizeof name) == NVML_SUCCESS) figures.name = name;
    nvmlMemory_t memory{};
    if (nvml_->memory(device, &memory) == NVML_SUCCESS) {
      figures.memory_total = memory.total;
      figures.memory_used = memory.used;
    }
    nvmlUtilization_t utilization{};
    if (nvml_->utilization && nvml_->utilization(device, &utilization) == NVML_SUCCESS)
      figures.utilization_pct = utilization.gpu;
    unsigned int processes = 0;
    // With no buffer, NVML answers the count (SUCCESS when 0, INSUFFICIENT_SIZE otherwise).
    if (nvml_->processes) {
      const nvmlReturn_t rc = nvml_->processes(device, &processes, nullptr);
      if (rc == NVML_SUCCESS || rc == NVML_ERROR_INSUFFICIENT_SIZE) figures.processes = processes;
      // The list itself (gpuslicectl status names them); room for a few that start meanwhile.
      std::vector<nvmlProcessInfo_t> infos(processes + 8);
      unsigned int listed = static_cast<unsigned int>(infos.size());
      if (processes > 0 && nvml_->processes(device, &listed, infos.data()) == NVML_SUCCESS)
        for (unsigned int k = 0; k < listed; ++k)
          figures.process_list.push_back({infos[k].pid, infos[k].usedGpuMemory});
    }
    devices.push_back(std::move(figures));
  }
  return devices;
}

}  // namespace gpuslice::gpu
