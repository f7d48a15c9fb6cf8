#include "exporter/nvml_devices.h"

#include <string>
#include <type_traits>
#include <vector>

#include "common/mutex_lock.h"
#include "common/nvml_loader.h"

namespace gpuslice::exporter {

struct NvmlDevices::Api : nvml::DeviceQueries {
  // Optional: a device or library without them still reports the rest.
  decltype(&nvmlDeviceGetUtilizationRates) utilization = nullptr;
  decltype(&nvmlDeviceGetComputeRunningProcesses_v3) processes = nullptr;
};

// Neither nvmlShutdown nor dlclose: other threads may still be reading at exit.
NvmlDevices::NvmlDevices() = default;
NvmlDevices::~NvmlDevices() = default;

Status NvmlDevices::Load() {
  if (!library_) {
    const Result<void*> opened = nvml::Open(nvml::kLibrary);
    if (!opened.ok()) {
      return Status::Error(std::string("cannot load ") + nvml::kLibrary + ": " + opened.message());
    }
    library_ = *opened;
    api_ = std::make_unique<Api>();
    auto bind = [this](auto* fn, const char* name) REQUIRES(mutex_) {  // called here, under the lock
      *fn = nvml::Symbol<std::remove_reference_t<decltype(*fn)>>(library_, name);
    };
    api_->Bind(library_);  // which of them are required is checked below
    bind(&api_->utilization, "nvmlDeviceGetUtilizationRates");
    bind(&api_->processes, "nvmlDeviceGetComputeRunningProcesses_v3");
  }
  if (!api_->init || !api_->count || !api_->handle_by_index || !api_->uuid || !api_->name || !api_->memory) {
    return Status::Error(
        "libnvidia-ml.so.1 lacks nvmlInit_v2, nvmlDeviceGetCount_v2, nvmlDeviceGetHandleByIndex_v2, "
        "nvmlDeviceGetUUID, nvmlDeviceGetName or nvmlDeviceGetMemoryInfo");
  }
  if (!initialised_) {
    const nvmlReturn_t rc = api_->init();
    if (rc != NVML_SUCCESS) {
      return Status::Error("nvmlInit_v2 failed with NVML error " + std::to_string(static_cast<int>(rc)));
    }
    initialised_ = true;
  }
  return Status::Ok();
}

Result<std::vector<DeviceFigures>> NvmlDevices::Read() {
  MutexLock lock(&mutex_);
  if (Status loaded = Load(); !loaded.ok()) return loaded;
  unsigned int count = 0;
  if (const nvmlReturn_t rc = api_->count(&count); rc != NVML_SUCCESS) {
    return Status::Error("nvmlDeviceGetCount_v2 failed with NVML error " + std::to_string(static_cast<int>(rc)));
  }
  std::vector<DeviceFigures> devices;
  for (unsigned int i = 0; i < count; ++i) {
    nvmlDevice_t device = nullptr;
    if (api_->handle_by_index(i, &device) != NVML_SUCCESS) continue;
    DeviceFigures figures;
    figures.index = static_cast<int>(i);
    char text[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
    if (api_->uuid(device, text, sizeof text) != NVML_SUCCESS) continue;
    figures.uuid = text;
    char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE] = {};
    if (api_->name(device, name, sizeof name) == NVML_SUCCESS) figures.name = name;
    nvmlMemory_t memory{};
    if (api_->memory(device, &memory) == NVML_SUCCESS) {
      figures.memory_total = memory.total;
      figures.memory_used = memory.used;
    }
    nvmlUtilization_t utilization{};
    if (api_->utilization && api_->utilization(device, &utilization) == NVML_SUCCESS)
      figures.utilization_pct = utilization.gpu;
    unsigned int processes = 0;
    // With no buffer, NVML answers the count (SUCCESS when 0, INSUFFICIENT_SIZE otherwise).
    if (api_->processes) {
      const nvmlReturn_t rc = api_->processes(device, &processes, nullptr);
      if (rc == NVML_SUCCESS || rc == NVML_ERROR_INSUFFICIENT_SIZE) figures.processes = processes;
      // The list itself (gpuslicectl status names them); room for a few that start meanwhile.
      std::vector<nvmlProcessInfo_t> infos(processes + 8);
      unsigned int listed = static_cast<unsigned int>(infos.size());
      if (processes > 0 && api_->processes(device, &listed, infos.data()) == NVML_SUCCESS)
        for (unsigned int k = 0; k < listed; ++k)
          figures.process_list.push_back({infos[k].pid, infos[k].usedGpuMemory});
    }
    devices.push_back(std::move(figures));
  }
  return devices;
}

}  // namespace gpuslice::exporter
