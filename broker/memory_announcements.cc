// The node's side of memory requests: a daemon that admitted a container (gpuslice-device-plugin
// at Allocate, gpuslice-dra-driver at NodePrepareResources) holds the tenant's request before
// the container starts, and withdraws it when the container's booking ends. No process is
// registered for it: the ledger's `announced` field holds the request (broker/memory_requests.h).
#include <cstring>

#include <fmt/format.h>

#include "broker/broker.h"
#include "broker/ledger.h"
#include "broker/lock_fault.h"
#include "broker/memory_requests.h"
#include "broker/segment_file.h"
#include "broker/tables.h"
#include "broker/uuid.h"

namespace gpuslice::broker {
namespace {

constexpr uint32_t kInUse = static_cast<uint32_t>(EntryState::kInUse);
const char kNoMemory[] = "gpuslice: out of memory in the broker";

// The tenant and GPU entries of a name and UUID already in the tables (nothing is claimed).
std::optional<LedgerId> FindLedgerOf(const Segment& segment, const std::string& tenant, const uint8_t (&uuid)[16]) {
  std::optional<TenantIndex> found_tenant;
  for (TenantIndex t : UsedTenants(segment)) {
    const TenantEntry& entry = At(segment, t);
    if (entry.state.load() == kInUse && NameLength(entry) == tenant.size() &&
        std::memcmp(entry.name, tenant.data(), tenant.size()) == 0)
      found_tenant = t;
  }
  uint64_t words[2];
  std::memcpy(words, uuid, sizeof words);
  for (GpuIndex g : UsedGpus(segment)) {
    const GpuEntry& entry = At(segment, g);
    if (found_tenant && entry.state.load() == kInUse && entry.uuid[0].load() == words[0] &&
        entry.uuid[1].load() == words[1])
      return LedgerId::Of(*found_tenant, g);
  }
  return std::nullopt;
}

std::string Describe(MemoryShare share) {
  return "a request of " + MemoryText(share.request) + " and a limit of " + MemoryText(share.limit);
}

}  // namespace

Status Broker::AnnounceRequest(const std::string& tenant, const uint8_t (&uuid)[16], uint64_t device_total_bytes,
                               MemoryShare share, MemoryAnnouncer by, std::string* warning) {
  try {
    if (tenant.empty() || tenant.size() >= static_cast<size_t>(kTenantNameBytes) ||
        tenant.find('\0') != std::string::npos) {
      return Status::InvalidArgument(fmt::format("gpuslice: tenant name '{}' is invalid: 1 to 63 bytes", tenant));
    }
    if (share.request > share.limit) {
      return Status::InvalidArgument(fmt::format("gpuslice: tenant '{}': a memory request of {} above its limit of {}",
                                                 tenant, MemoryText(share.request), MemoryText(share.limit)));
    }
    if (share.request == 0 || by == MemoryAnnouncer::kNone) return Status::Ok();  // nothing to hold
    if (!file_->writable) return Status::PermissionDenied("gpuslice: " + file_->path + " is mapped read-only");
    Segment* segment = file_->segment;
    TableLock table(segment, TableLock::Failure::kReturn);
    if (!table.locked()) return table.status();
    std::optional<TenantIndex> tenant_index = FindOrClaimTenant(segment, tenant, /*recycle=*/false);
    std::optional<GpuIndex> gpu = FindOrClaimGpu(segment, uuid, device_total_bytes, /*recycle=*/false);
    if (!tenant_index || !gpu) {
      ReapDeadLocked(segment, file_->fd.get(), ProcessSlot::From(slot_));
      if (!tenant_index) tenant_index = FindOrClaimTenant(segment, tenant, /*recycle=*/true);
      if (!gpu) gpu = FindOrClaimGpu(segment, uuid, device_total_bytes, /*recycle=*/true);
    }
    if (!tenant_index || !gpu) {
      return Status::ResourceExhausted(
          fmt::format("gpuslice: the tenant or GPU table of {} is full; cannot hold tenant '{}''s request on {}",
                      file_->path, tenant, FormatUuid(uuid)));
    }
    const LedgerId ledger = LedgerId::Of(*tenant_index, *gpu);
    LedgerEntry& entry = At(*segment, ledger);
    LedgerLock lock(segment, ledger, /*report=*/false, LockTimeoutNs());
    if (!lock.locked()) {
      return Status::Unavailable(LockFaultLine(segment, fmt::format("the memory ledger lock of tenant '{}'", tenant),
                                               lock.failure(), "its request cannot be held"));
    }
    const MemoryShare current{entry.request.load(), entry.quota.load()};
    const bool held = RequestHeldElsewhere(*segment, ledger, std::nullopt);
    if (entry.state.load() == kInUse && current != share) {
      if (held || entry.used.load() != 0) {
        return Status::InvalidArgument(fmt::format(
            "gpuslice: tenant '{}' holds {} on {}; the node announces {} for it (a container's share must equal "
            "the one its tenant's running processes hold)",
            tenant, Describe(current), FormatUuid(uuid), Describe(share)));
      }
    }
    const bool was_in_use = entry.state.load() == kInUse;
    SetRequest(segment, ledger, share.request);
    entry.quota.store(share.limit);
    entry.state.store(kInUse);
    if (held) {  // its processes hold the request already: the announcement keeps it held after them
      entry.announced.store(static_cast<uint32_t>(by));
      return Status::Ok();
    }
    Status holding = HoldRequest(segment, ledger, LockTimeoutNs(), /*refuse_if_borrowed=*/false, by, warning);
    if (!holding.ok()) {  // refused: the ledger is as it was
      SetRequest(segment, ledger, current.request);
      entry.quota.store(current.limit);
      if (!was_in_use) entry.state.store(static_cast<uint32_t>(EntryState::kFree));
    }
    return holding;
  } catch (...) {
    return Status::Error(kNoMemory);
  }
}

Status Broker::WithdrawRequest(const std::string& tenant, const uint8_t (&uuid)[16], MemoryAnnouncer by) {
  try {
    if (!file_->writable) return Status::PermissionDenied("gpuslice: " + file_->path + " is mapped read-only");
    Segment* segment = file_->segment;
    TableLock table(segment, TableLock::Failure::kReturn);  // the entries must not be recycled meanwhile
    if (!table.locked()) return table.status();
    const std::optional<LedgerId> ledger = FindLedgerOf(*segment, tenant, uuid);
    if (!ledger) return Status::Ok();
    LedgerEntry& entry = At(*segment, *ledger);
    LedgerLock lock(segment, *ledger, /*report=*/false, LockTimeoutNs());
    if (!lock.locked()) {
      return Status::Unavailable(LockFaultLine(segment, fmt::format("the memory ledger lock of tenant '{}'", tenant),
                                               lock.failure(), "its request stays held"));
    }
    // Releasing only lowers what the GPU's tenants commit: no decision to take under the GPU's lock.
    if (entry.announced.load() == static_cast<uint32_t>(by)) entry.announced.store(0);
    return Status::Ok();
  } catch (...) {
    return Status::Error(kNoMemory);
  }
}

std::vector<AnnouncedRequest> Broker::Announced(MemoryAnnouncer by) const {
  std::vector<AnnouncedRequest> found;
  const Segment& segment = *file_->segment;
  for (TenantIndex t : UsedTenants(segment)) {
    const TenantEntry& tenant = At(segment, t);
    if (tenant.state.load() != kInUse) continue;
    for (GpuIndex g : UsedGpus(segment)) {
      const LedgerEntry& entry = At(segment, LedgerId::Of(t, g));
      if (At(segment, g).state.load() != kInUse || entry.state.load() != kInUse ||
          entry.announced.load() != static_cast<uint32_t>(by))
        continue;
      found.push_back({std::string(tenant.name, NameLength(tenant)), GpuUuidOf(segment, g),
                       MemoryShare{entry.request.load(), entry.quota.load()}});
    }
  }
  return found;
}

}  // namespace gpuslice::broker
