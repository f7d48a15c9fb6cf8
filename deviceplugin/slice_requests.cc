#include "deviceplugin/slice_requests.h"

#include <fmt/format.h>

#include "broker/uuid.h"
#include "common/mutex_lock.h"

namespace gpuslice::deviceplugin {

Status SliceRequests::Hold(const std::string& tenant, const std::vector<SliceMemory>& memory, std::string* warning) {
  MutexLock lock(&mutex_);
  Result<broker::Broker*> broker = broker_.Get();
  if (!broker.ok()) return broker.status();
  for (size_t i = 0; i < memory.size(); ++i) {
    uint8_t uuid[16];
    if (!broker::ParseUuid(memory[i].uuid, uuid))
      return Status::InvalidArgument(fmt::format("'{}' is no UUID", memory[i].uuid));
    std::string borrowed;
    Status held = (*broker)->AnnounceRequest(tenant, uuid, memory[i].device_memory, memory[i].share,
                                             broker::MemoryAnnouncer::kDevicePlugin, &borrowed);
    if (!held.ok()) {
      for (size_t k = 0; k < i; ++k) {  // all devices or none
        if (broker::ParseUuid(memory[k].uuid, uuid))
          (void)(*broker)->WithdrawRequest(tenant, uuid, broker::MemoryAnnouncer::kDevicePlugin);
      }
      return held;
    }
    if (!borrowed.empty()) *warning += fmt::format("{}{}", warning->empty() ? "" : "; ", borrowed);
  }
  missing_once_.erase(tenant);
  return Status::Ok();
}

std::vector<std::string> SliceRequests::Reconcile(const std::set<std::string>& live) {
  MutexLock lock(&mutex_);
  std::vector<std::string> withdrawn;
  Result<broker::Broker*> broker = broker_.Get();
  if (!broker.ok()) return withdrawn;
  std::set<std::string> missing;
  for (const broker::AnnouncedRequest& held : (*broker)->Announced(broker::MemoryAnnouncer::kDevicePlugin)) {
    if (live.contains(held.tenant)) continue;
    if (!missing_once_.contains(held.tenant)) {
      missing.insert(held.tenant);
      continue;
    }
    uint8_t uuid[16];
    if (broker::ParseUuid(held.gpu_uuid, uuid) &&
        (*broker)->WithdrawRequest(held.tenant, uuid, broker::MemoryAnnouncer::kDevicePlugin).ok())
      withdrawn.push_back(held.tenant);
  }
  missing_once_ = std::move(missing);
  return withdrawn;
}

}  // namespace gpuslice::deviceplugin
