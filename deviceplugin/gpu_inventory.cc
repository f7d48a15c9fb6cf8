#include "deviceplugin/gpu_inventory.h"

#include "common/mutex.h"
#include "common/mutex_lock.h"
#include "common/nvml_events.h"
#include "common/nvml_loader.h"

namespace gpuslice::deviceplugin {

// The NVML entry points the plugin uses, resolved once.
struct GpuInventory::Api : nvml::DeviceQueries {
  void* handle = nullptr;
  Mutex mutex;  // NVML is thread-safe; this only orders discovery and health polls (guards no member)
  decltype(&nvmlErrorString) error_string = nullptr;
  // MIG queries. Optional: a driver without them has no MIG, and every GPU is listed whole.
  nvml::GetMigModeFn mig_mode = nullptr;
  nvml::GetMaxMigDeviceCountFn max_mig_count = nullptr;
  nvml::GetMigDeviceHandleByIndexFn mig_by_index = nullptr;
  // NUMA placement. Optional: without it no topology is advertised.
  nvml::GetCpuAffinityWithinScopeFn affinity = nullptr;

  bool HasMig() const { return mig_mode && max_mig_count && mig_by_index; }

  std::string Error(const char* call, nvmlReturn_t result) const {
    return std::string("gpuslice-device-plugin: ") + call + " failed: " + error_string(result);
  }
};

namespace {

std::string NoSymbol(const char* symbol) {
  return std::string("gpuslice-device-plugin: NVML has no ") + symbol + "; a driver of R450 or newer is needed";
}

// Whether `handle` has `symbol`, stored in *out.
template <typename F>
bool Resolve(void* handle, const char* symbol, F* out) {
  *out = nvml::Symbol<F>(handle, symbol);
  return *out != nullptr;
}

}  // namespace

GpuInventory::GpuInventory(std::unique_ptr<Api> api) : api_(std::move(api)) {}

// NVML's event API, resolved when XIDs are first watched; an event set for every GPU.
struct GpuInventory::Events {
  decltype(&nvmlEventSetCreate) create = nullptr;
  decltype(&nvmlDeviceRegisterEvents) register_events = nullptr;
  decltype(&nvmlEventSetWait_v2) wait = nullptr;
  decltype(&nvmlEventSetFree) free = nullptr;
  nvmlEventSet_t set = nullptr;
  std::vector<std::pair<nvmlDevice_t, int>> gpus;  // registered handles and their NVML indices
};

GpuInventory::~GpuInventory() {
  if (events_ && events_->set) events_->free(events_->set);
  api_->shutdown();
  // The library stays loaded: NVML's own threads may outlive the shutdown call.
}

Result<std::unique_ptr<GpuInventory>> GpuInventory::Open(const std::string& library) {
  auto api = std::make_unique<Api>();
  const Result<void*> opened = nvml::Open(library);
  if (!opened.ok()) {
    return Status::NotFound("gpuslice-device-plugin: cannot load NVML from '" + library + "' (" + opened.message() +
                            "); is the NVIDIA driver installed and the library on the loader path (nvmlLibrary)?");
  }
  api->handle = *opened;
  void* h = api->handle;
  if (const char* missing = api->Bind(h)) return Status::NotFound(NoSymbol(missing));
  if (!Resolve(h, "nvmlErrorString", &api->error_string)) return Status::NotFound(NoSymbol("nvmlErrorString"));
  if (!Resolve(h, "nvmlDeviceGetMigMode", &api->mig_mode) ||
      !Resolve(h, "nvmlDeviceGetMaxMigDeviceCount", &api->max_mig_count) ||
      !Resolve(h, "nvmlDeviceGetMigDeviceHandleByIndex", &api->mig_by_index))
    api->mig_mode = nullptr;
  Resolve(h, "nvmlDeviceGetCpuAffinityWithinScope", &api->affinity);
  const nvmlReturn_t result = api->init();
  if (result != NVML_SUCCESS) return Status::Error(api->Error("nvmlInit", result));
  return std::unique_ptr<GpuInventory>(new GpuInventory(std::move(api)));
}

// One device's UUID, name and memory; the NVML call that failed in *call.
nvmlReturn_t GpuInventory::Describe(nvmlDevice_t device, GpuInfo* info, const char** call) {
  char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
  char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE] = {};
  nvmlMemory_t memory{};
  *call = "nvmlDeviceGetUUID";
  nvmlReturn_t result = api_->uuid(device, uuid, sizeof uuid);
  if (result == NVML_SUCCESS) *call = "nvmlDeviceGetName", result = api_->name(device, name, sizeof name);
  if (result == NVML_SUCCESS) *call = "nvmlDeviceGetMemoryInfo", result = api_->memory(device, &memory);
  info->uuid = uuid;
  info->name = name;
  info->total_memory = memory.total;
  return result;
}

namespace {

// The lowest NUMA node in NVML's node mask for `device`, or -1 when NVML does not say.
int NumaNode(nvml::GetCpuAffinityWithinScopeFn affinity, nvmlDevice_t device) {
  if (affinity == nullptr) return -1;
  unsigned long nodes[4] = {};
  if (affinity(device, 4, nodes, nvml::kAffinityScopeNode) != NVML_SUCCESS) return -1;
  for (int word = 0; word < 4; ++word) {
    if (nodes[word] != 0) return word * 64 + __builtin_ctzl(nodes[word]);
  }
  return -1;
}

}  // namespace

Result<Discovery> GpuInventory::Discover() {
  MutexLock lock(&api_->mutex);
  Discovery discovery;
  unsigned int count = 0;
  nvmlReturn_t result = api_->count(&count);
  if (result != NVML_SUCCESS) return Status::Error(api_->Error("nvmlDeviceGetCount", result));
  for (unsigned int i = 0; i < count; ++i) {
    nvmlDevice_t device = nullptr;
    GpuInfo gpu;
    gpu.index = static_cast<int>(i);
    const char* call = "nvmlDeviceGetHandleByIndex";
    result = api_->handle_by_index(i, &device);
    if (result == NVML_SUCCESS) result = Describe(device, &gpu, &call);
    // One GPU that does not answer (fallen off the bus, in need of a reset) must not keep the
    // node's other GPUs from being served: it is left out, and the log says why.
    if (result != NVML_SUCCESS) {
      discovery.left_out.push_back({gpu.index, std::string(call) + ": " + api_->error_string(result)});
      continue;
    }
    gpu.numa_node = NumaNode(api_->affinity, device);
    unsigned int mode = 0, pending = 0, slots = 0;
    const bool mig = api_->HasMig() && api_->mig_mode(device, &mode, &pending) == NVML_SUCCESS &&
                     mode == nvml::kMigEnabled;
    if (!mig) {
      discovery.gpus.push_back(std::move(gpu));
      continue;
    }
    result = api_->max_mig_count(device, &slots);
    if (result != NVML_SUCCESS) {
      discovery.left_out.push_back(
          {gpu.index, std::string("nvmlDeviceGetMaxMigDeviceCount: ") + api_->error_string(result)});
      continue;
    }
    std::vector<GpuInfo> instances;
    for (unsigned int m = 0; m < slots && result == NVML_SUCCESS; ++m) {
      nvmlDevice_t instance = nullptr;
      const nvmlReturn_t found = api_->mig_by_index(device, m, &instance);
      if (found == NVML_ERROR_NOT_FOUND) continue;  // a free slot: no instance there
      GpuInfo info;
      info.index = gpu.index;
      info.mig_index = static_cast<int>(m);
      info.parent_uuid = gpu.uuid;
      info.numa_node = gpu.numa_node;
      call = "nvmlDeviceGetMigDeviceHandleByIndex";
      result = found;
      if (result == NVML_SUCCESS) result = Describe(instance, &info, &call);
      if (result == NVML_SUCCESS) instances.push_back(std::move(info));
      else
        discovery.left_out.push_back({gpu.index, std::string(call) + " for MIG device " + std::to_string(m) + ": " +
                                                     api_->error_string(result)});
    }
    if (result == NVML_SUCCESS) discovery.gpus.insert(discovery.gpus.end(), instances.begin(), instances.end());
  }
  return discovery;
}

std::string GpuInventory::Problem(const GpuInfo& gpu, bool* lost) {
  MutexLock lock(&api_->mutex);
  const char* call = "nvmlDeviceGetHandleByIndex";
  nvmlDevice_t device = nullptr;
  nvmlReturn_t result = api_->handle_by_index(static_cast<unsigned int>(gpu.index), &device);
  if (result == NVML_SUCCESS && gpu.mig_index >= 0) {
    nvmlDevice_t instance = nullptr;
    call = "nvmlDeviceGetMigDeviceHandleByIndex";
    result = api_->HasMig() ? api_->mig_by_index(device, static_cast<unsigned int>(gpu.mig_index), &instance)
                            : NVML_ERROR_NOT_SUPPORTED;
    device = instance;
  }
  char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
  if (result == NVML_SUCCESS) call = "nvmlDeviceGetUUID", result = api_->uuid(device, uuid, sizeof uuid);
  nvmlMemory_t memory{};
  if (result == NVML_SUCCESS) call = "nvmlDeviceGetMemoryInfo", result = api_->memory(device, &memory);
  if (lost) *lost = result == NVML_ERROR_GPU_IS_LOST || result == NVML_ERROR_RESET_REQUIRED;
  if (result != NVML_SUCCESS) return std::string(call) + ": " + api_->error_string(result);
  if (gpu.uuid != uuid) return "nvmlDeviceGetUUID: the device is now " + std::string(uuid) + ", not " + gpu.uuid;
  return "";
}

Status GpuInventory::WatchXids() {
  auto events = std::make_unique<Events>();
  void* h = api_->handle;
  if (!Resolve(h, "nvmlEventSetCreate", &events->create) ||
      !Resolve(h, "nvmlDeviceRegisterEvents", &events->register_events) ||
      !Resolve(h, "nvmlEventSetWait_v2", &events->wait) || !Resolve(h, "nvmlEventSetFree", &events->free)) {
    return Status::NotFound("gpuslice: NVML has no event API (nvmlEventSetWait_v2); XID errors are not watched");
  }
  MutexLock lock(&api_->mutex);
  if (const nvmlReturn_t r = events->create(&events->set); r != NVML_SUCCESS)
    return Status::Error(api_->Error("nvmlEventSetCreate", r));
  unsigned int count = 0;
  if (const nvmlReturn_t r = api_->count(&count); r != NVML_SUCCESS) {
    events->free(events->set);
    return Status::Error(api_->Error("nvmlDeviceGetCount", r));
  }
  for (unsigned int i = 0; i < count; ++i) {
    nvmlDevice_t device = nullptr;
    // A GPU that does not answer now cannot be registered; its XIDs then go unseen, and its
    // health comes from the polls alone.
    if (api_->handle_by_index(i, &device) != NVML_SUCCESS) continue;
    if (events->register_events(device, nvmlEventTypeXidCriticalError, events->set) == NVML_SUCCESS)
      events->gpus.push_back({device, static_cast<int>(i)});
  }
  events_ = std::move(events);
  return Status::Ok();
}

std::vector<XidEvent> GpuInventory::WaitForXids(int timeout_ms) {
  std::vector<XidEvent> found;
  if (!events_) return found;
  // Not under api_->mutex: a wait must not hold discovery and the health polls up.
  for (unsigned int wait = static_cast<unsigned int>(timeout_ms);; wait = 0) {
    nvmlEventData_t data{};
    if (events_->wait(events_->set, &data, wait) != NVML_SUCCESS) break;
    if ((data.eventType & nvmlEventTypeXidCriticalError) == 0) continue;
    for (const auto& [device, index] : events_->gpus)
      if (device == data.device) found.push_back({index, data.eventData});
  }
  return found;
}

}  // namespace gpuslice::deviceplugin
