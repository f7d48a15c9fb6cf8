#include "dra/claim_preparer.h"

#include <cstdio>

#include <fmt/format.h>

#include "common/mutex_lock.h"
#include "common/printable.h"
#include "common/replace_file.h"
#include "dra/cdi_spec.h"
#include "dra/claim_allocation.h"
#include "dra/claim_environment.h"
#include "dra/resource_claim.h"
#include "dra/tenant_name.h"

namespace gpuslice::dra {
namespace {

std::string Described(const ClaimRef& ref) {
  return fmt::format("{}/{}", Printable(ref.claim_namespace), Printable(ref.name));
}

// The kubelet's claim UID becomes a CDI device name and a file name: anything but a UID is refused.
Status CheckClaimRef(const ClaimRef& ref) {
  if (ValidCdiNamePart(ref.uid)) return Status::Ok();
  return Status::InvalidArgument(fmt::format("gpuslice-dra-driver: claim {} has UID \"{}\"; expected {}",
                                             Described(ref), Printable(ref.uid), kCdiNamePartRule));
}

// A UID names one claim: the same UID under another namespace or name is not the claim prepared.
Status SameClaim(const ClaimRef& ref, const PreparedClaim& prepared) {
  if (ref.claim_namespace == prepared.claim_namespace && ref.name == prepared.name) return Status::Ok();
  return Status::InvalidArgument(fmt::format(
      "gpuslice-dra-driver: claim {} has UID {}, which this node prepared for claim {}/{}; a UID names one claim",
      Described(ref), ref.uid, Printable(prepared.claim_namespace), Printable(prepared.name)));
}

}  // namespace

ClaimPreparer::ClaimPreparer(DriverConfig config, ApiClient* api)
    : config_(std::move(config)), api_(api), memory_(config_.host_state_dir) {}

std::string ClaimPreparer::checkpoint_path() const { return fmt::format("{}/{}", config_.plugin_dir, kCheckpointFile); }

Status ClaimPreparer::Load() {
  MutexLock lock(&mutex_);
  // A driver killed while writing the checkpoint or a spec left its temporary: no longer anyone's.
  for (const auto& [dir, prefix] :
       {std::pair{config_.plugin_dir, kCheckpointFile}, std::pair{config_.cdi_dir, kCdiSpecFilePrefix}}) {
    for (const std::string& name : RemoveStaleTemporaries(dir, prefix)) {
      fmt::print(stderr, "gpuslice-dra-driver: removed {}/{}, left by a driver killed while writing it\n", dir,
                 Printable(name));
    }
  }
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
  if (Status valid = CheckClaimRef(ref); !valid.ok()) return valid;
  MutexLock lock(&mutex_);
  if (auto it = claims_.find(ref.uid); it != claims_.end()) {
    if (Status same = SameClaim(ref, it->second); !same.ok()) return same;
    return it->second.devices;
  }
  const Result<nlohmann::json> read = api_->GetResourceClaim(ref.claim_namespace, ref.name);
  if (!read.ok()) return read.status();
  const Result<ResourceClaim> claim = ParseResourceClaim(*read);
  if (!claim.ok()) {
    return Status::InvalidArgument(fmt::format("gpuslice-dra-driver: claim {} at the API server is malformed: {}",
                                               Described(ref), claim.message()));
  }
  if (claim->uid != ref.uid) {
    return Status::Error(
        fmt::format("gpuslice-dra-driver: claim {} has UID {} at the API server, not {} (deleted and created again?)",
                    Described(ref), Printable(claim->uid), ref.uid));
  }
  Result<ClaimDevice> allocated = ReadClaimAllocation(*claim, config_, devices_);
  if (!allocated.ok()) {
    return Status::Error(allocated.status().code(), fmt::format("gpuslice-dra-driver: {}", allocated.message()));
  }
  const ClaimDevice& device = *allocated;
  const std::string tenant = TenantName(ref.claim_namespace, ref.name);
  const Result<std::map<std::string, std::string>> env = ClaimEnvironment(device, config_, tenant);
  if (!env.ok()) return env.status();
  const broker::MemoryShare share{device.memory, device.memory_limit ? device.memory_limit : device.memory};
  const std::string what = fmt::format("gpuslice-dra-driver: claim {}", Described(ref));
  std::string borrowed;
  if (Status held = memory_.Hold(tenant, device.uuid, device.device_memory, share, &borrowed); !held.ok())
    return Status::Error(held.code(), fmt::format("{}: {}", what, held.message()));
  if (!borrowed.empty()) fmt::print(stderr, "{}: {}\n", what, borrowed);
  nlohmann::json spec = CdiSpecJson(config_, ref.uid, device.device, device.share_id, *env);
  if (nlohmann::json hooks = DriverLimitsHooks(config_, tenant, device.uuid, share); !hooks.empty())
    spec["devices"][0]["containerEdits"]["hooks"] = std::move(hooks);
  if (Status written = WriteCdiSpec(config_, ref.uid, spec); !written.ok()) {
    (void)memory_.Release(tenant);  // nothing changes on failure
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
    (void)memory_.Release(tenant);
    return saved;
  }
  claims_ = std::move(next);
  return claims_[ref.uid].devices;
}

Status ClaimPreparer::Unprepare(const ClaimRef& ref) {
  if (Status valid = CheckClaimRef(ref); !valid.ok()) return valid;
  MutexLock lock(&mutex_);
  const auto it = claims_.find(ref.uid);
  if (it != claims_.end()) {
    if (Status same = SameClaim(ref, it->second); !same.ok()) return same;
  }
  if (Status removed = RemoveCdiSpec(config_, ref.uid); !removed.ok()) return removed;
  if (Status released = memory_.Release(TenantName(ref.claim_namespace, ref.name)); !released.ok())
    return Status::Error(released.code(),
                         fmt::format("gpuslice-dra-driver: claim {}: its memory request stays held: {}", Described(ref),
                                     released.message()));
  if (it == claims_.end()) return Status::Ok();
  PreparedClaims next = claims_;
  next.erase(ref.uid);
  if (Status saved = SaveCheckpoint(checkpoint_path(), next); !saved.ok()) return saved;
  claims_ = std::move(next);
  return Status::Ok();
}

}  // namespace gpuslice::dra
