// The driver's own per-cgroup memory limits (MPS v3 memory partitioning: NVIDIA driver r615 /
// CUDA 13.4 and later), through NVML loaded at run time: nvmlDeviceSetMemoryLimits_v1 (root) and
// nvmlDeviceGetMemoryLimits_v1 on a cgroup's sysfs path. Older drivers lack the functions or
// answer NVML_ERROR_NOT_SUPPORTED; MIG instances are never supported (docs/accounting.md,
// "Three levels of enforcement").
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/nvml_api.h"
#include "common/status.h"

namespace gpuslice::driverlimits {

enum class DriverSupport {
  kYes,          // the GPU's driver enforces per-cgroup limits
  kNoSupport,    // the driver has no memory partitioning (before r615), or the GPU is in MIG mode
  kMigInstance,  // a MIG instance: partitioning does not cover MIG
  kUnknownGpu,   // NVML does not know the UUID
};

struct CgroupLimits {
  uint64_t soft = 0;
  uint64_t hard = NVML_DEVICE_MEMORY_LIMIT_MAX;
  uint64_t used = 0;
  bool set() const { return !(soft == 0 && hard == NVML_DEVICE_MEMORY_LIMIT_MAX); }
};

class DriverMemoryLimits {
 public:
  // NVML from `library`, initialised; an error of one line when it cannot be loaded or started.
  static Result<std::unique_ptr<DriverMemoryLimits>> Open(const std::string& library);
  ~DriverMemoryLimits();
  DriverMemoryLimits(const DriverMemoryLimits&) = delete;
  DriverMemoryLimits& operator=(const DriverMemoryLimits&) = delete;

  DriverSupport SupportOn(const std::string& gpu_uuid);
  // Errors name the GPU, the cgroup and NVML's reason.
  Status Set(const std::string& gpu_uuid, const std::string& cgroup, uint64_t soft, uint64_t hard);
  Status Clear(const std::string& gpu_uuid, const std::string& cgroup);
  Result<CgroupLimits> Get(const std::string& gpu_uuid, const std::string& cgroup);

 private:
  struct Api;
  explicit DriverMemoryLimits(std::unique_ptr<Api> api);
  Result<nvmlDevice_t> Device(const std::string& gpu_uuid);
  std::unique_ptr<Api> api_;
};

// "driver r615 or later (MPS v3 memory partitioning)": what status and the docs call the feature.
inline constexpr char kDriverFeature[] = "per-cgroup memory limits (NVIDIA driver r615 or later)";

}  // namespace gpuslice::driverlimits
