#include "driverlimits/driver_memory_limits.h"

#include "gpu/nvml_library.h"

namespace gpuslice::driverlimits {

// NVML's entry points as gpu/nvml_library.h binds them; set and get are null on a driver before r615.
struct DriverMemoryLimits::Api {
  std::unique_ptr<const gpu::NvmlLibrary> nvml;
  decltype(&nvmlInit_v2) init = nullptr;
  decltype(&nvmlShutdown) shutdown = nullptr;
  decltype(&nvmlErrorString) error_string = nullptr;
  decltype(&nvmlDeviceGetHandleByUUID) handle_by_uuid = nullptr;
  decltype(&nvmlDeviceSetMemoryLimits_v1) set = nullptr;
  decltype(&nvmlDeviceGetMemoryLimits_v1) get = nullptr;
  std::string Reason(nvmlReturn_t rc) const {
    const char* text = error_string ? error_string(rc) : nullptr;
    return (text ? std::string(text) : "NVML error") + " (" + std::to_string(static_cast<int>(rc)) + ")";
  }
};

DriverMemoryLimits::DriverMemoryLimits(std::unique_ptr<Api> api) : api_(std::move(api)) {}

DriverMemoryLimits::~DriverMemoryLimits() {
  if (api_->shutdown) api_->shutdown();
}

Result<std::unique_ptr<DriverMemoryLimits>> DriverMemoryLimits::Open(const std::string& library) {
  Result<std::unique_ptr<const gpu::NvmlLibrary>> opened = gpu::NvmlLibrary::Open(library);
  if (!opened.ok()) return Status::Unavailable(opened.message());
  auto api = std::make_unique<Api>();
  api->nvml = std::move(opened).value();
  api->init = api->nvml->init;
  api->shutdown = api->nvml->shutdown;
  api->error_string = api->nvml->error_string;
  api->handle_by_uuid = api->nvml->handle_by_uuid;
  api->set = api->nvml->set_memory_limits;
  api->get = api->nvml->get_memory_limits;
  if (!api->handle_by_uuid) return Status::Unavailable(library + " lacks nvmlDeviceGetHandleByUUID");
  if (const nvmlReturn_t rc = api->init(); rc != NVML_SUCCESS) {
    const std::string reason = api->Reason(rc);
    api->shutdown = nullptr;  // not initialised: nothing to shut down
    return Status::Unavailable("NVML did not start: " + reason);
  }
  return std::unique_ptr<DriverMemoryLimits>(new DriverMemoryLimits(std::move(api)));
}

Result<nvmlDevice_t> DriverMemoryLimits::Device(const std::string& gpu_uuid) {
  nvmlDevice_t device = nullptr;
  if (const nvmlReturn_t rc = api_->handle_by_uuid(gpu_uuid.c_str(), &device); rc != NVML_SUCCESS)
    return Status::NotFound("NVML does not know " + gpu_uuid + ": " + api_->Reason(rc));
  return device;
}

DriverSupport DriverMemoryLimits::SupportOn(const std::string& gpu_uuid) {
  if (gpu_uuid.rfind("MIG-", 0) == 0) return DriverSupport::kMigInstance;
  const Result<nvmlDevice_t> device = Device(gpu_uuid);
  if (!device.ok()) return DriverSupport::kUnknownGpu;
  if (!api_->set || !api_->get) return DriverSupport::kNoSupport;
  // Asking for the root cgroup's limits answers NOT_SUPPORTED where partitioning is missing.
  nvmlGetMemoryLimits_v1_t limits{};
  limits.nameSpace = "/sys/fs/cgroup";
  return api_->get(*device, &limits) == NVML_SUCCESS ? DriverSupport::kYes : DriverSupport::kNoSupport;
}

Status DriverMemoryLimits::Set(const std::string& gpu_uuid, const std::string& cgroup, uint64_t soft, uint64_t hard) {
  if (!api_->set) return Status::Unavailable("the driver has no " + std::string(kDriverFeature));
  Result<nvmlDevice_t> device = Device(gpu_uuid);
  if (!device.ok()) return device.status();
  nvmlSetMemoryLimits_v1_t limits{};
  limits.nameSpace = cgroup.c_str();
  limits.softLimit = soft;
  limits.hardLimit = hard;
  if (const nvmlReturn_t rc = api_->set(*device, &limits); rc != NVML_SUCCESS) {
    const Status::Code code = rc == NVML_ERROR_NOT_SUPPORTED   ? Status::Code::kUnavailable
                              : rc == NVML_ERROR_NO_PERMISSION ? Status::Code::kPermissionDenied
                                                               : Status::Code::kError;
    return Status::Error(code,
                         "nvmlDeviceSetMemoryLimits_v1 on " + gpu_uuid + " for " + cgroup + ": " + api_->Reason(rc));
  }
  return Status::Ok();
}

Status DriverMemoryLimits::Clear(const std::string& gpu_uuid, const std::string& cgroup) {
  return Set(gpu_uuid, cgroup, 0, NVML_DEVICE_MEMORY_LIMIT_MAX);
}

Result<CgroupLimits> DriverMemoryLimits::Get(const std::string& gpu_uuid, const std::string& cgroup) {
  if (!api_->get) return Status::Unavailable("the driver has no " + std::string(kDriverFeature));
  Result<nvmlDevice_t> device = Device(gpu_uuid);
  if (!device.ok()) return device.status();
  nvmlGetMemoryLimits_v1_t limits{};
  limits.nameSpace = cgroup.c_str();
  if (const nvmlReturn_t rc = api_->get(*device, &limits); rc != NVML_SUCCESS)
    return Status::Error("nvmlDeviceGetMemoryLimits_v1 on " + gpu_uuid + " for " + cgroup + ": " + api_->Reason(rc));
  return CgroupLimits{limits.softLimit, limits.hardLimit, limits.currentUsed};
}

}  // namespace gpuslice::driverlimits
