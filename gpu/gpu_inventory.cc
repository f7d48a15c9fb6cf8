#include "gpu/gpu_inventory.h"

#include <fmt/format.h>

#include "common/mutex_lock.h"

namespace gpuslice::gpu {

GpuInventory::GpuInventory(std::unique_ptr<const NvmlLibrary> nvml) : nvml_(std::move(nvml)) {}

// An event set for every GPU, made when XIDs are first watched.
struct GpuInventory::Events {
  nvmlEventSet_t set = nullptr;
  std::vector<std::pair<nvmlDevice_t, int>> gpus;  // registered handles and their NVML indices
};

GpuInventory::~GpuInventory() {
  if (events_ && events_->set) nvml_->event_set_free(events_->set);
  nvml_->shutdown();
  // The library stays loaded: NVML's own threads may outlive the shutdown call.
}

Result<std::unique_ptr<GpuInventory>> GpuInventory::Open(const std::string& library) {
  Result<std::unique_ptr<const NvmlLibrary>> opened = NvmlLibrary::Open(library);
  if (!opened.ok()) return opened.status();
  std::unique_ptr<const NvmlLibrary> nvml = std::move(opened).value();
  const nvmlReturn_t result = nvml->init();
  if (result != NVML_SUCCESS) return Status::Error(nvml->CallFailed("nvmlInit", result));
  return std::unique_ptr<GpuInventory>(new GpuInventory(std::move(nvml)));
}

// One device's UUID, name and memory; the NVML call that failed in *call.
nvmlReturn_t GpuInventory::Describe(nvmlDevice_t device, GpuInfo* info, const char** call) {
  char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
  char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE] = {};
  nvmlMemory_t memory{};
  *call = "nvmlDeviceGetUUID";
  nvmlReturn_t result = nvml_->uuid(device, uuid, sizeof uuid);
  if (result == NVML_SUCCESS) *call = "nvmlDeviceGetName", result = nvml_->name(device, name, sizeof name);
  if (result == NVML_SUCCESS) *call = "nvmlDeviceGetMemoryInfo", result = nvml_->memory(device, &memory);
  info->uuid = uuid;
  info->name = name;
  info->total_memory = memory.total;
  return result;
}

namespace {

// The lowest NUMA node in NVML's node mask for `device`; none when NVML does not say.
std::optional<int> NumaNode(GetCpuAffinityWithinScopeFn affinity, nvmlDevice_t device) {
  if (affinity == nullptr) return std::nullopt;
  unsigned long nodes[4] = {};
  if (affinity(device, 4, nodes, kAffinityScopeNode) != NVML_SUCCESS) return std::nullopt;
  for (int word = 0; word < 4; ++word) {
    if (nodes[word] != 0) return word * 64 + __builtin_ctzl(nodes[word]);
  }
  return std::nullopt;
}

}  // namespace

Result<Discovery> GpuInventory::Discover() {
  MutexLock lock(&mutex_);
  Discovery discovery;
  unsigned int count = 0;
  nvmlReturn_t result = nvml_->count(&count);
  if (result != NVML_SUCCESS) return Status::Error(nvml_->CallFailed("nvmlDeviceGetCount", result));
  for (unsigned int i = 0; i < count; ++i) {
    nvmlDevice_t device = nullptr;
    GpuInfo gpu;
    gpu.index = static_cast<int>(i);
    const char* call = "nvmlDeviceGetHandleByIndex";
    result = nvml_->handle_by_index(i, &device);
    if (result == NVML_SUCCESS) result = Describe(device, &gpu, &call);
    // One GPU that does not answer (fallen off the bus, in need of a reset) must not keep the
    // node's other GPUs from being served: it is left out, and the log says why.
    if (result != NVML_SUCCESS) {
      discovery.left_out.push_back({gpu.index, fmt::format("{}: {}", call, nvml_->error_string(result))});
      continue;
    }
    gpu.numa_node = NumaNode(nvml_->affinity, device);
    unsigned int mode = 0, pending = 0, slots = 0;
    const bool mig = nvml_->HasMig() && nvml_->mig_mode(device, &mode, &pending) == NVML_SUCCESS && mode == kMigEnabled;
    if (!mig) {
      discovery.gpus.push_back(std::move(gpu));
      continue;
    }
    result = nvml_->max_mig_count(device, &slots);
    if (result != NVML_SUCCESS) {
      discovery.left_out.push_back(
          {gpu.index, fmt::format("nvmlDeviceGetMaxMigDeviceCount: {}", nvml_->error_string(result))});
      continue;
    }
    std::vector<GpuInfo> instances;
    for (unsigned int m = 0; m < slots && result == NVML_SUCCESS; ++m) {
      nvmlDevice_t instance = nullptr;
      const nvmlReturn_t found = nvml_->mig_by_index(device, m, &instance);
      if (found == NVML_ERROR_NOT_FOUND) continue;  // a free slot: no instance there
      GpuInfo info;
      info.index = gpu.index;
      info.mig_index = static_cast<int>(m);
      info.parent_uuid = gpu.uuid;
      info.parent_name = gpu.name;
      info.numa_node = gpu.numa_node;
      call = "nvmlDeviceGetMigDeviceHandleByIndex";
      result = found;
      if (result == NVML_SUCCESS) result = Describe(instance, &info, &call);
      if (result == NVML_SUCCESS) instances.push_back(std::move(info));
      else
        discovery.left_out.push_back(
            {gpu.index, fmt::format("{} for MIG device {}: {}", call, m, nvml_->error_string(result))});
    }
    if (result == NVML_SUCCESS) discovery.gpus.insert(discovery.gpus.end(), instances.begin(), instances.end());
  }
  return discovery;
}

std::string GpuInventory::Problem(const GpuInfo& gpu, bool* lost) {
  MutexLock lock(&mutex_);
  const char* call = "nvmlDeviceGetHandleByIndex";
  nvmlDevice_t device = nullptr;
  nvmlReturn_t result = nvml_->handle_by_index(static_cast<unsigned int>(gpu.index), &device);
  if (result == NVML_SUCCESS && gpu.mig_index >= 0) {
    nvmlDevice_t instance = nullptr;
    call = "nvmlDeviceGetMigDeviceHandleByIndex";
    result = nvml_->HasMig() ? nvml_->mig_by_index(device, static_cast<unsigned int>(gpu.mig_index), &instance)
                             : NVML_ERROR_NOT_SUPPORTED;
    device = instance;
  }
  char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
  if (result == NVML_SUCCESS) call = "nvmlDeviceGetUUID", result = nvml_->uuid(device, uuid, sizeof uuid);
  nvmlMemory_t memory{};
  if (result == NVML_SUCCESS) call = "nvmlDeviceGetMemoryInfo", result = nvml_->memory(device, &memory);
  if (lost) *lost = result == NVML_ERROR_GPU_IS_LOST || result == NVML_ERROR_RESET_REQUIRED;
  if (result != NVML_SUCCESS) return fmt::format("{}: {}", call, nvml_->error_string(result));
  if (gpu.uuid != uuid) return fmt::format("nvmlDeviceGetUUID: the device is now {}, not {}", uuid, gpu.uuid);
  return "";
}

Status GpuInventory::WatchXids() {
  if (!nvml_->HasEvents())
    return Status::NotFound("NVML has no event API (nvmlEventSetWait_v2); XID errors are not watched");
  auto events = std::make_unique<Events>();
  MutexLock lock(&mutex_);
  if (const nvmlReturn_t r = nvml_->event_set_create(&events->set); r != NVML_SUCCESS)
    return Status::Error(nvml_->CallFailed("nvmlEventSetCreate", r));
  unsigned int count = 0;
  if (const nvmlReturn_t r = nvml_->count(&count); r != NVML_SUCCESS) {
    nvml_->event_set_free(events->set);
    return Status::Error(nvml_->CallFailed("nvmlDeviceGetCount", r));
  }
  for (unsigned int i = 0; i < count; ++i) {
    nvmlDevice_t device = nullptr;
    // A GPU that does not answer now cannot be registered; its XIDs then go unseen, and its
    // health comes from the polls alone.
    if (nvml_->handle_by_index(i, &device) != NVML_SUCCESS) continue;
    if (nvml_->register_events(device, nvmlEventTypeXidCriticalError, events->set) == NVML_SUCCESS)
      events->gpus.push_back({device, static_cast<int>(i)});
  }
  events_ = std::move(events);
  return Status::Ok();
}

std::vector<XidEvent> GpuInventory::WaitForXids(int timeout_ms) {
  std::vector<XidEvent> found;
  if (!events_) return found;
  // Not under mutex_: a wait must not hold discovery and the health polls up.
  for (unsigned int wait = static_cast<unsigned int>(timeout_ms);; wait = 0) {
    nvmlEventData_t data{};
    if (nvml_->event_set_wait(events_->set, &data, wait) != NVML_SUCCESS) break;
    if ((data.eventType & nvmlEventTypeXidCriticalError) == 0) continue;
    for (const auto& [device, index] : events_->gpus)
      if (device == data.device) found.push_back({index, data.eventData});
  }
  return found;
}

std::string GpuInventory::DriverVersion() {
  if (nvml_->driver_version == nullptr) return "";
  char text[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE] = {};
  MutexLock lock(&mutex_);
  return nvml_->driver_version(text, sizeof text) == NVML_SUCCESS ? std::string(text) : std::string();
}

}  // namespace gpuslice::gpu
