#include "dra/claim_preparer.h"

#include "common/mutex_lock.h"
#include "dra/cdi_spec.h"
#include "dra/claim_allocation.h"
#include "dra/claim_environment.h"

namespace gpuslice::dra {

ClaimPreparer::ClaimPreparer(DriverConfig config, ApiClient* api) : config_(std::move(config)), api_(api) {}

Status ClaimPreparer::Load() {
  MutexLock lock(&mutex_);
  Result<PreparedClaims> loaded = LoadCheckpoint(checkpoint_path());
  if (!loaded.ok()) {
    claims_.clear();
    return std::move(loaded).status();
  }
  claims_ = std::move(loaded).value();
  return Status::Ok();
}

void ClaimPreparer::SetDevices(std::vector<NodeDevice> devices) {
  MutexLock lock(&mutex_);
  devices_ = std::move(devices);
}

size_t ClaimPreparer::prepared() const {
  MutexLock lock(&mutex_);
  return claims_.size();
}

Result<std::vector<PreparedDevice>> ClaimPreparer::Prepare(const ClaimRef& ref) {
  MutexLock lock(&mutex_);
  if (auto it = claims_.find(ref.uid); it != claims_.end()) return it->second.devices;
  const Result<nlohmann::json> read = api_->GetResourceClaim(ref.claim_namespace, ref.name);
  if (!read.ok()) return read.status();
  const nlohmann::json& claim = *read;
  const std::string uid = claim.value("metadata", nlohmann::json::object()).value("uid", "");
  if (uid != ref.uid) {
    return Status::Error("gpuslice-dra-driver: claim " + ref.claim_namespace + "/" + ref.name + " has UID " + uid +
                         " at the API server, not " + ref.uid + " (deleted and created again?)");
  }
  ClaimDevice device;
  try {  // a field of an unexpected JSON type: an answer for this claim, never a failed call
    Result<ClaimDevice> allocated = ReadClaimAllocation(claim, config_, devices_);
    if (!allocated.ok()) {
      return Status::Error(allocated.status().code(), "gpuslice-dra-driver: " + allocated.message());
    }
    device = std::move(allocated).value();
  } catch (const nlohmann::json::exception& e) {
    return Status::InvalidArgument("gpuslice-dra-driver: claim " + ref.claim_namespace + "/" + ref.name +
                                   " is malformed: " + e.what());
  }
  const Result<std::map<std::string, std::string>> env =
      ClaimEnvironment(device, config_, TenantName(ref.claim_namespace, ref.name, ref.uid));
  if (!env.ok()) return env.status();
  if (Status written =
          WriteCdiSpec(config_, ref.uid, CdiSpecJson(config_, ref.uid, device.device, device.share_id, *env));
      !written.ok()) {
    return written;
  }
  PreparedClaims next = claims_;
  next[ref.uid] = {ref.claim_namespace,
                   ref.name,
                   {{device.request,
                     device.pool,
                     device.device,
                     {CdiDeviceId(ref.uid, device.device, device.share_id)},
                     device.share_id}}};
  if (Status saved = SaveCheckpoint(checkpoint_path(), next); !saved.ok()) {
    (void)RemoveCdiSpec(config_, ref.uid);  // nothing changes on failure
    return saved;
  }
  claims_ = std::move(next);
  return claims_[ref.uid].devices;
}

Status ClaimPreparer::Unprepare(const ClaimRef& ref) {
  MutexLock lock(&mutex_);
  if (Status removed = RemoveCdiSpec(config_, ref.uid); !removed.ok()) return removed;
  if (!claims_.count(ref.uid)) return Status::Ok();
  PreparedClaims next = claims_;
  next.erase(ref.uid);
  if (Status saved = SaveCheckpoint(checkpoint_path(), next); !saved.ok()) return saved;
  claims_ = std::move(next);
  return Status::Ok();
}

}  // namespace gpuslice::dra
