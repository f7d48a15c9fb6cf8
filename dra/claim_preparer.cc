#include "dra/claim_preparer.h"

#include "common/mutex_lock.h"
#include "dra/cdi_spec.h"
#include "dra/claim_allocation.h"
#include "dra/claim_environment.h"

namespace gpuslice::dra {

ClaimPreparer::ClaimPreparer(DriverConfig config, ApiClient* api) : config_(std::move(config)), api_(api) {}

bool ClaimPreparer::Load(std::string* error) {
  MutexLock lock(&mutex_);
  return LoadCheckpoint(checkpoint_path(), &claims_, error);
}

void ClaimPreparer::SetDevices(std::vector<NodeDevice> devices) {
  MutexLock lock(&mutex_);
  devices_ = std::move(devices);
}

size_t ClaimPreparer::prepared() const {
  MutexLock lock(&mutex_);
  return claims_.size();
}

bool ClaimPreparer::Prepare(const ClaimRef& ref, std::vector<PreparedDevice>* devices, std::string* error) {
  MutexLock lock(&mutex_);
  if (auto it = claims_.find(ref.uid); it != claims_.end()) {
    *devices = it->second.devices;
    return true;
  }
  nlohmann::json claim;
  if (!api_->GetResourceClaim(ref.claim_namespace, ref.name, &claim, error)) return false;
  const std::string uid = claim.value("metadata", nlohmann::json::object()).value("uid", "");
  if (uid != ref.uid) {
    *error = "gpuslice-dra-driver: claim " + ref.claim_namespace + "/" + ref.name + " has UID " + uid +
             " at the API server, not " + ref.uid + " (deleted and created again?)";
    return false;
  }
  ClaimDevice device;
  try {  // a field of an unexpected JSON type: an answer for this claim, never a failed call
    if (!ReadClaimAllocation(claim, config_, devices_, &device, error)) {
      *error = "gpuslice-dra-driver: " + *error;
      return false;
    }
  } catch (const nlohmann::json::exception& e) {
    *error = "gpuslice-dra-driver: claim " + ref.claim_namespace + "/" + ref.name + " is malformed: " + e.what();
    return false;
  }
  std::map<std::string, std::string> env;
  if (!ClaimEnvironment(device, config_, TenantName(ref.claim_namespace, ref.name, ref.uid), &env, error)) return false;
  if (!WriteCdiSpec(config_, ref.uid, CdiSpecJson(config_, ref.uid, device.device, env), error)) return false;
  PreparedClaims next = claims_;
  next[ref.uid] = {ref.claim_namespace, ref.name, {{device.request, device.pool, device.device, {CdiDeviceId(ref.uid, device.device)}}}};
  if (!SaveCheckpoint(checkpoint_path(), next, error)) {
    std::string ignored;
    RemoveCdiSpec(config_, ref.uid, &ignored);  // nothing changes on failure
    return false;
  }
  claims_ = std::move(next);
  *devices = claims_[ref.uid].devices;
  return true;
}

bool ClaimPreparer::Unprepare(const ClaimRef& ref, std::string* error) {
  MutexLock lock(&mutex_);
  if (!RemoveCdiSpec(config_, ref.uid, error)) return false;
  if (!claims_.count(ref.uid)) return true;
  PreparedClaims next = claims_;
  next.erase(ref.uid);
  if (!SaveCheckpoint(checkpoint_path(), next, error)) return false;
  claims_ = std::move(next);
  return true;
}

}  // namespace gpuslice::dra
