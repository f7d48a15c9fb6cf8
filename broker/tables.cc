#include "broker/tables.h"

#include <algorithm>
#include <bitset>
#include <cstring>

#include "broker/ledger.h"
#include "broker/memory_requests.h"
#include "common/clock.h"
#include "common/process_lock.h"
#include "common/robust_mutex.h"

namespace gpuslice::broker {
namespace {

constexpr uint32_t kFree = static_cast<uint32_t>(EntryState::kFree);
constexpr uint32_t kInUse = static_cast<uint32_t>(EntryState::kInUse);
constexpr uint32_t kRegistered = static_cast<uint32_t>(ProcessState::kRegistered);

// A free entry below the high-water mark, else the first never-used one (raising the mark
// before the entry is written, so that a claimed entry is always below it). nullopt when full.
// `first_use` prepares a never-used entry before the mark covers it: a claimant killed halfway
// leaves it past the mark, to be prepared again by the next.
template <typename Index, typename Entry, typename FirstUse>
std::optional<Index> FreeEntry(Entry (&entries)[Index::kCount], std::atomic<uint32_t>* mark, FirstUse first_use) {
  const IndexRange<Index> used(mark->load());
  for (Index i : used) {
    if (entries[i.value()].state.load() == kFree) return i;
  }
  const auto next = Index::From(used.size());
  if (next) {
    first_use(*next);
    mark->store(static_cast<uint32_t>(used.size() + 1));
  }
  return next;
}

// Ledger mutexes are initialised as the tables grow rather than when the file is created, so
// that the file's pages are touched only for the tenants and GPUs a node has (docs/broker.md,
// "Size"). The rule: the ledger of tenant t on GPU g is initialised once t and g are both below
// their high-water marks. Whichever of the two is claimed second, for the first time, initialises
// it, before raising its mark; both claims hold the table mutex. Nobody can hold such a mutex
// before: a process opens a ledger only on a claimed GPU, as a claimed tenant. A forged index
// past a mark finds a zeroed mutex, which RobustLock refuses as corrupt.
void InitLedgersOfNewTenant(Segment* segment, TenantIndex tenant) {
  // sabotage-point: ledger-init-on-new-tenant-off
  for (GpuIndex gpu : UsedGpus(*segment)) InitRobustMutex(&At(*segment, LedgerId::Of(tenant, gpu)).mutex.mutex);
}
void InitLedgersOfNewGpu(Segment* segment, GpuIndex gpu) {
  for (TenantIndex tenant : UsedTenants(*segment))
    InitRobustMutex(&At(*segment, LedgerId::Of(tenant, gpu)).mutex.mutex);
}

// A ledger whose tenant or GPU entry is (re)claimed starts unset. No registered process has a
// charge on it (that is what made the entry free or recyclable), so `used` is zero already
// unless a holder died mid-update; the lock repairs that first. A ledger whose lock is broken
// is left as it is: it keeps refusing (fail closed) until the file is removed.
void ResetLedger(Segment* segment, LedgerId ledger) {
  LedgerLock lock(segment, ledger);
  if (!lock.locked()) return;
  LedgerEntry& entry = At(*segment, ledger);
  entry.state.store(kFree);
  entry.quota.store(0);
  entry.used.store(0);
  SetRequest(segment, ledger, 0);
  entry.announced.store(0);
  // The compute share of a recycled tenant starts afresh (broker/scheduler.cc).
  entry.request_pct.store(0);
  entry.limit_pct.store(0);
  entry.waiting.store(0);
  entry.vtime.store(0);
  entry.service_ns.store(0);
  entry.tokens_ns.store(0);
  entry.tokens_at_ns.store(0);
  entry.window_service_ns.store(0);
  entry.last_share_ppm.store(0);
  entry.compute_class.store(0);
  entry.priority_tokens_ns.store(0);
  entry.priority_tokens_at_ns.store(0);
  entry.refused_allocations.store(0);
  entry.refused_bytes.store(0);
  entry.grants_received.store(0);
  entry.waits.store(0);
  entry.wait_ns.store(0);
  for (auto& bucket : entry.wait_buckets) bucket.store(0);
}

// A slot's scheduling state says nothing once its process is gone: a dead predecessor's
// in-flight work or waiting stamp must not pin a grant.
void ClearSchedState(ProcessEntry& process) {
  for (ProcessGpuState& gpu : process.sched) {
    gpu.inflight.store(0);
    gpu.grace_ns.store(0);
    gpu.idle_since_ns.store(0);
    gpu.heartbeat_ns.store(0);
    gpu.waiting_ns.store(0);
    gpu.priority_until_ns.store(0);
    gpu.busy_since_ns.store(0);
  }
}

bool IsRegistered(const ProcessEntry& process) { return process.state.load() == kRegistered; }

// A ledger whose request the node announced keeps its tenant's and its GPU's entries: recycling
// either would drop a request an admitted container was promised.
bool Announced(const Segment& segment, TenantIndex tenant, GpuIndex gpu) {
  return At(segment, LedgerId::Of(tenant, gpu)).announced.load() != 0;
}

}  // namespace

std::optional<TenantIndex> FindOrClaimTenant(Segment* segment, std::string_view name, bool recycle) {
  for (TenantIndex i : UsedTenants(*segment)) {
    const TenantEntry& entry = At(*segment, i);
    if (entry.state.load() == kInUse && entry.name_length == name.size() &&
        std::memcmp(entry.name, name.data(), name.size()) == 0) {
      return i;
    }
  }
  std::optional<TenantIndex> chosen =
      FreeEntry<TenantIndex>(segment->tenants, &segment->header.tenant_high_water,
                             [segment](TenantIndex t) { InitLedgersOfNewTenant(segment, t); });
  if (!chosen && recycle) {
    std::bitset<kMaxTenants> busy;
    for (ProcessSlot p : UsedProcessSlots(*segment)) {
      const ProcessEntry& process = At(*segment, p);
      if (!IsRegistered(process)) continue;
      if (const auto tenant = TenantOf(process)) busy.set(static_cast<size_t>(tenant->value()));
    }
    for (TenantIndex t : UsedTenants(*segment))
      for (GpuIndex g : UsedGpus(*segment))
        if (Announced(*segment, t, g)) busy.set(static_cast<size_t>(t.value()));
    for (TenantIndex t : AllIndices<TenantIndex>()) {
      if (!busy.test(static_cast<size_t>(t.value()))) {
        chosen = t;
        break;
      }
    }
  }
  if (!chosen) return std::nullopt;
  TenantEntry& entry = At(*segment, *chosen);
  entry.state.store(kFree);  // a recycled entry: unpublished before it is rewritten
  // GPUs past the high-water mark have never had a ledger of any tenant (claiming one resets them).
  for (GpuIndex gpu : UsedGpus(*segment)) ResetLedger(segment, LedgerId::Of(*chosen, gpu));
  std::memset(entry.name, 0, sizeof entry.name);
  std::memcpy(entry.name, name.data(), std::min<size_t>(name.size(), kTenantNameBytes - 1));
  entry.name_length = static_cast<uint32_t>(std::min<size_t>(name.size(), kTenantNameBytes - 1));
  entry.state.store(kInUse);
  return chosen;
}

std::optional<GpuIndex> FindOrClaimGpu(Segment* segment, const uint8_t (&uuid)[16], uint64_t total_memory,
                                       bool recycle) {
  uint64_t words[2];
  std::memcpy(words, uuid, sizeof words);
  for (GpuIndex i : UsedGpus(*segment)) {
    GpuEntry& entry = At(*segment, i);
    if (entry.state.load() == kInUse && entry.uuid[0].load() == words[0] && entry.uuid[1].load() == words[1]) {
      if (entry.total_memory.load() != total_memory) entry.total_memory.store(total_memory);
      return i;
    }
  }
  std::optional<GpuIndex> chosen = FreeEntry<GpuIndex>(segment->gpus, &segment->header.gpu_high_water,
                                                       [segment](GpuIndex g) { InitLedgersOfNewGpu(segment, g); });
  if (!chosen && recycle) {
    uint64_t open[kGpuMaskWords] = {};
    for (ProcessSlot p : UsedProcessSlots(*segment)) {
      const ProcessEntry& process = At(*segment, p);
      if (!IsRegistered(process)) continue;
      for (int w = 0; w < kGpuMaskWords; ++w) open[w] |= process.open_gpus[w].load();
    }
    for (TenantIndex t : UsedTenants(*segment))
      for (GpuIndex g : UsedGpus(*segment))
        if (Announced(*segment, t, g)) open[g.value() / 64] |= OpenGpusBit(g);
    for (GpuIndex g : AllIndices<GpuIndex>()) {
      if (!(open[g.value() / 64] & OpenGpusBit(g))) {
        chosen = g;
        break;
      }
    }
  }
  if (!chosen) return std::nullopt;
  GpuEntry& entry = At(*segment, *chosen);
  entry.state.store(kFree);
  // Tenants past the high-water mark have never had a ledger on any GPU.
  for (TenantIndex t : UsedTenants(*segment)) ResetLedger(segment, LedgerId::Of(t, *chosen));
  entry.uuid[0].store(words[0]);
  entry.uuid[1].store(words[1]);
  entry.total_memory.store(total_memory);
  // A recycled GPU entry takes nothing of the previous GPU's scheduling with it.
  entry.mode.store(0);
  entry.quantum_ns.store(0);
  entry.holder.store(0);
  entry.closing.store(0);
  entry.waiting.store(0);
  entry.grant_start_ns.store(0);
  entry.vclock.store(0);
  entry.grants.store(0);
  entry.window_start_ns.store(0);
  entry.budget_ns.store(0);
  entry.priority.store(0);
  entry.request_ledgers.store(0);  // its ledgers were reset above: none has a request
  entry.state.store(kInUse);
  return chosen;
}

std::optional<ProcessSlot> ClaimProcessSlot(Segment* segment, int fd, TenantIndex tenant, int32_t pid) {
  const uint64_t base = kLivenessLockBase;
  const IndexRange<ProcessSlot> used = UsedProcessSlots(*segment);
  std::optional<ProcessSlot> chosen;
  for (ProcessSlot i : used) {
    // A free slot whose byte is still locked belongs to no one we can reason about: skip it.
    if (At(*segment, i).state.load() == kFree && TryLockByte(fd, base + static_cast<uint64_t>(i.value()))) {
      chosen = i;
      break;
    }
  }
  for (auto next = ProcessSlot::From(used.size()); !chosen && next; next = ProcessSlot::From(next->value() + 1)) {
    segment->header.process_high_water.store(static_cast<uint32_t>(next->value() + 1));
    if (TryLockByte(fd, base + static_cast<uint64_t>(next->value()))) chosen = next;
  }
  if (!chosen) return std::nullopt;
  ProcessEntry& process = At(*segment, *chosen);
  process.generation.fetch_add(1);  // before anything else: lock-free readers see the reuse
  process.tenant.store(tenant.value());
  process.pid.store(pid);
  ClearOpenGpus(process);
  process.started_ns.store(MonotonicNanos());
  for (auto& charged : process.charged) charged.store(0);  // already zero: freed slots hold none
  ClearSchedState(process);
  process.state.store(kRegistered);
  return chosen;
}

bool ReturnChargesAndFree(Segment* segment, ProcessSlot slot, uint64_t ledger_wait_ns) {
  ProcessEntry& process = At(*segment, slot);
  const std::optional<TenantIndex> tenant = TenantOf(process);
  bool left = false;
  for (GpuIndex g : AllIndices<GpuIndex>()) {
    if (!IsGpuOpen(process, g) && At(process.charged, g).load() == 0) continue;
    if (!tenant) {  // corrupt: nothing to return the charge to
      At(process.charged, g).store(0);
      continue;
    }
    // Also visits ledgers this process opened without a charge: if it died holding one's mutex
    // mid-update, locking it here repairs the total.
    const LedgerId ledger = LedgerId::Of(*tenant, g);
    LedgerLock lock(segment, ledger, /*report=*/true, ledger_wait_ns);
    if (lock.failure() == LockFailure::kTimedOut) {
      left = true;  // held (a stopped process mid-update): returned by a later reap, not lost
      continue;
    }
    if (lock.locked()) {
      LedgerEntry& entry = At(*segment, ledger);
      const uint64_t charged = At(process.charged, g).load();
      const uint64_t used = entry.used.load();
      entry.used.store(used - std::min(charged, used));
    }
    // With the ledger's lock broken its `used` keeps the charge (it refuses anyway); the slot is
    // freed all the same, so that every later reap does not wait for that lock again.
    At(process.charged, g).store(0);
  }
  if (left) return false;
  ClearOpenGpus(process);
  ClearSchedState(process);
  process.state.store(kFree);
  return true;
}

int ReapDeadLocked(Segment* segment, int fd, std::optional<ProcessSlot> own_slot) {
  if (fd < 0) return 0;  // no descriptor to ask the kernel through: everyone would look dead
  int reaped = 0;
  for (ProcessSlot i : UsedProcessSlots(*segment)) {
    if (i == own_slot || !IsRegistered(At(*segment, i))) continue;
    if (IsByteLockedByOther(fd, kLivenessLockBase + static_cast<uint64_t>(i.value()))) continue;
    if (!ReturnChargesAndFree(segment, i, kReapLedgerWaitNs)) continue;
    segment->header.processes_reaped.fetch_add(1, std::memory_order_relaxed);
    ++reaped;
  }
  return reaped;
}

}  // namespace gpuslice::broker
