#include "ctl/status_enforcement.h"

#include <fmt/format.h>

#include "ctl/units.h"
#include "driverlimits/driver_memory_limits.h"
#include "driverlimits/limit_records.h"
#include "gpu/nvml_library.h"

namespace gpuslice::ctl {

using Level = MemoryEnforcement::Level;

EnforcementByGpu ReadMemoryEnforcement(const broker::Snapshot& snapshot, const std::string& state_dir,
                                       const MigTopology& mig) {
  EnforcementByGpu out;
  // The broker keys a MIG instance by its UUID's bytes, as any GPU: NVML says which are instances.
  auto is_instance = [&](const broker::GpuView& gpu) { return mig.count(UuidKey(gpu.uuid)) != 0; };
  for (const auto& gpu : snapshot.gpus)
    if (is_instance(gpu)) out[gpu.uuid].level = Level::kMig;
  Result<std::unique_ptr<driverlimits::DriverMemoryLimits>> driver =
      driverlimits::DriverMemoryLimits::Open(gpu::kNvmlLibrary);
  if (!driver.ok()) return out;  // unknown: said nowhere, as the device's figures are
  for (const auto& gpu : snapshot.gpus) {
    if (is_instance(gpu)) continue;
    switch ((*driver)->SupportOn(gpu.uuid)) {
      case driverlimits::DriverSupport::kYes: out[gpu.uuid].level = Level::kDriver; break;
      case driverlimits::DriverSupport::kNoSupport: out[gpu.uuid].level = Level::kPreloadOnly; break;
      default: break;
    }
  }
  for (const driverlimits::LimitRecord& record : driverlimits::ReadRecords(state_dir)) {
    const auto it = out.find(record.gpu_uuid);
    if (it == out.end() || it->second.level != Level::kDriver) continue;
    // What the driver holds now, not what the record says it was told.
    const Result<driverlimits::CgroupLimits> held = (*driver)->Get(record.gpu_uuid, record.cgroup);
    if (!held.ok() || held->hard != record.hard || held->soft != record.soft) continue;
    DriverEnforced& tenant = it->second.driver_enforced[record.tenant];
    tenant.hard = record.hard;
    tenant.soft = record.soft;
    tenant.containers += 1;
  }
  return out;
}

std::string EnforcementLine(const MemoryEnforcement& enforcement) {
  switch (enforcement.level) {
    case Level::kUnknown: return "";
    case Level::kPreloadOnly:
      return fmt::format(
          "memory: enforced by the preload only (the driver has no {}): a process without the "
          "preload is not limited",
          driverlimits::kDriverFeature);
    case Level::kDriver:
      if (enforcement.driver_enforced.empty())
        return "memory: enforced by the preload; the driver has per-cgroup hard limits, set on no tenant container "
               "here (gpuslice-driver-limits sets them as a container's hook)";
      return fmt::format(
          "memory: enforced by the preload, and by the driver's per-cgroup hard limits on the "
          "containers of {} tenant{} (driver-enforced below)",
          enforcement.driver_enforced.size(), enforcement.driver_enforced.size() == 1 ? "" : "s");
    case Level::kMig:
      return "memory: enforced by the preload within the MIG instance's own memory (the driver's per-cgroup limits "
             "do not cover MIG)";
  }
  return "";
}

std::string DriverEnforcedText(const DriverEnforced& limits) {
  return fmt::format("driver-enforced: hard {}, soft {} ({} container{})", FormatBytes(limits.hard),
                     FormatBytes(limits.soft), limits.containers, limits.containers == 1 ? "" : "s");
}

std::string LevelName(Level level) {
  switch (level) {
    case Level::kUnknown: return "";
    case Level::kPreloadOnly: return "preload";
    case Level::kDriver: return "preload+driver";
    case Level::kMig: return "preload (MIG)";
  }
  return "";
}

}  // namespace gpuslice::ctl
