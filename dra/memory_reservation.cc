#include "dra/memory_reservation.h"

#include <fmt/format.h>

#include "broker/uuid.h"

namespace gpuslice::dra {

Status MemoryReservation::Hold(const std::string& tenant, const std::string& gpu_uuid, uint64_t gpu_memory,
                               broker::MemoryShare share, std::string* warning) {
  // A MIG instance is a GPU of its own to the broker, keyed by the 16 bytes of its "MIG-" UUID
  // (what cuDeviceGetUuid answers on the instance), which the broker writes as "GPU-".
  const std::string key = gpu_uuid.rfind("MIG-", 0) == 0 ? fmt::format("GPU-{}", gpu_uuid.substr(4)) : gpu_uuid;
  uint8_t uuid[16];
  if (!broker::ParseUuid(key, uuid))
    return Status::InvalidArgument(fmt::format("device UUID '{}' is not one", gpu_uuid));
  Result<broker::Broker*> broker = broker_.Get();
  if (!broker.ok()) return broker.status();
  return (*broker)->AnnounceRequest(tenant, uuid, gpu_memory, share, broker::MemoryAnnouncer::kDraDriver, warning);
}

Status MemoryReservation::Release(const std::string& tenant) {
  Result<broker::Broker*> broker = broker_.Get();
  if (!broker.ok()) return broker.status();
  for (const broker::AnnouncedRequest& held : (*broker)->Announced(broker::MemoryAnnouncer::kDraDriver)) {
    uint8_t uuid[16];
    if (held.tenant != tenant || !broker::ParseUuid(held.gpu_uuid, uuid)) continue;
    if (Status withdrawn = (*broker)->WithdrawRequest(tenant, uuid, broker::MemoryAnnouncer::kDraDriver);
        !withdrawn.ok())
      return withdrawn;
  }
  return Status::Ok();
}

nlohmann::json DriverLimitsHooks(const DriverConfig& config, const std::string& tenant, const std::string& gpu_uuid,
                                 broker::MemoryShare share) {
  nlohmann::json hooks = nlohmann::json::array();
  if (config.driver_limits_hook.empty() || gpu_uuid.rfind("MIG-", 0) == 0) return hooks;
  const std::string& path = config.driver_limits_hook;
  const uint64_t hard = share.limit;  // kUnlimited is NVML's "no hard limit" too (UINT64_MAX)
  hooks.push_back({{"hookName", "createRuntime"},
                   {"path", path},
                   {"args",
                    {"gpuslice-driver-limits", "set", "--state-dir", config.host_state_dir, "--nvml-library",
                     config.nvml_library, "--tenant", tenant, "--gpu", gpu_uuid, "--request",
                     fmt::to_string(share.request), "--limit", fmt::to_string(hard)}}});
  hooks.push_back({{"hookName", "poststop"},
                   {"path", path},
                   {"args",
                    {"gpuslice-driver-limits", "clear", "--state-dir", config.host_state_dir, "--nvml-library",
                     config.nvml_library}}});
  return hooks;
}

}  // namespace gpuslice::dra
