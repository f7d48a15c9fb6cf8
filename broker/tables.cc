#include "broker/tables.h"

#include <algorithm>
#include <bitset>
#include <cstring>

#include "broker/ledger.h"
#include "common/clock.h"
#include "common/process_lock.h"

namespace gpuslice::broker {
namespace {

constexpr uint32_t kFree = static_cast<uint32_t>(EntryState::kFree);
constexpr uint32_t kInUse = static_cast<uint32_t>(EntryState::kInUse);
constexpr uint32_t kRegistered = static_cast<uint32_t>(ProcessState::kRegistered);

uint32_t HighWater(const std::atomic<uint32_t>& mark, int capacity) {
  return std::min(mark.load(), static_cast<uint32_t>(capacity));
}

// A free entry below the high-water mark, else the first never-used one (raising the mark
// before the entry is written, so that a claimed entry is always below it). -1 when full.
template <typename Entry, int N>
int FreeEntry(Entry (&entries)[N], std::atomic<uint32_t>* mark) {
  const uint32_t high_water = HighWater(*mark, N);
  for (uint32_t i = 0; i < high_water; ++i) {
    if (entries[i].state.load() == kFree) return static_cast<int>(i);
  }
  if (high_water == static_cast<uint32_t>(N)) return -1;
  mark->store(high_water + 1);
  return static_cast<int>(high_water);
}

// A ledger whose tenant or GPU entry is (re)claimed starts unset. No registered process has a
// charge on it (that is what made the entry free or recyclable), so `used` is zero already
// unless a holder died mid-update; the lock repairs that first.
void ResetLedger(Segment* segment, int ledger) {
  LedgerLock lock(segment, ledger);
  LedgerEntry& entry = segment->ledgers[ledger];
  entry.state.store(kFree);
  entry.quota.store(0);
  entry.used.store(0);
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

}  // namespace

int FindOrClaimTenant(Segment* segment, std::string_view name, bool recycle) {
  const uint32_t high_water = HighWater(segment->header.tenant_high_water, kMaxTenants);
  for (uint32_t i = 0; i < high_water; ++i) {
    const TenantEntry& entry = segment->tenants[i];
    if (entry.state.load() == kInUse && entry.name_length == name.size() &&
        std::memcmp(entry.name, name.data(), name.size()) == 0) {
      return static_cast<int>(i);
    }
  }
  int chosen = FreeEntry(segment->tenants, &segment->header.tenant_high_water);
  if (chosen < 0 && recycle) {
    std::bitset<kMaxTenants> busy;
    for (uint32_t p = 0; p < HighWater(segment->header.process_high_water, kMaxProcesses); ++p) {
      const int tenant = segment->processes[p].tenant.load();
      if (IsRegistered(segment->processes[p]) && tenant >= 0 && tenant < kMaxTenants) busy.set(tenant);
    }
    for (int t = 0; t < kMaxTenants && chosen < 0; ++t) {
      if (!busy.test(t)) chosen = t;
    }
  }
  if (chosen < 0) return -1;
  TenantEntry& entry = segment->tenants[chosen];
  entry.state.store(kFree);  // a recycled entry: unpublished before it is rewritten
  for (int gpu = 0; gpu < kMaxGpus; ++gpu) ResetLedger(segment, LedgerIndex(chosen, gpu));
  std::memset(entry.name, 0, sizeof entry.name);
  std::memcpy(entry.name, name.data(), name.size());
  entry.name_length = static_cast<uint32_t>(name.size());
  entry.state.store(kInUse);
  return chosen;
}

int FindOrClaimGpu(Segment* segment, const uint8_t (&uuid)[16], uint64_t total_memory, bool recycle) {
  uint64_t words[2];
  std::memcpy(words, uuid, sizeof words);
  const uint32_t high_water = HighWater(segment->header.gpu_high_water, kMaxGpus);
  for (uint32_t i = 0; i < high_water; ++i) {
    GpuEntry& entry = segment->gpus[i];
    if (entry.state.load() == kInUse && entry.uuid[0].load() == words[0] && entry.uuid[1].load() == words[1]) {
      if (entry.total_memory.load() != total_memory) entry.total_memory.store(total_memory);
      return static_cast<int>(i);
    }
  }
  int chosen = FreeEntry(segment->gpus, &segment->header.gpu_high_water);
  if (chosen < 0 && recycle) {
    uint32_t open = 0;
    for (uint32_t p = 0; p < HighWater(segment->header.process_high_water, kMaxProcesses); ++p) {
      if (IsRegistered(segment->processes[p])) open |= segment->processes[p].open_gpus.load();
    }
    for (int g = 0; g < kMaxGpus && chosen < 0; ++g) {
      if (!(open & (1u << g))) chosen = g;
    }
  }
  if (chosen < 0) return -1;
  GpuEntry& entry = segment->gpus[chosen];
  entry.state.store(kFree);
  // Tenants past the high-water mark have never had a ledger on any GPU.
  const uint32_t tenants = HighWater(segment->header.tenant_high_water, kMaxTenants);
  for (uint32_t t = 0; t < tenants; ++t) ResetLedger(segment, LedgerIndex(static_cast<int>(t), chosen));
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
  entry.state.store(kInUse);
  return chosen;
}

int ClaimProcessSlot(Segment* segment, int fd, int tenant, int32_t pid) {
  const uint64_t base = kLivenessLockBase;
  uint32_t high_water = HighWater(segment->header.process_high_water, kMaxProcesses);
  int chosen = -1;
  for (uint32_t i = 0; i < high_water && chosen < 0; ++i) {
    // A free slot whose byte is still locked belongs to no one we can reason about: skip it.
    if (segment->processes[i].state.load() == kFree && TryLockByte(fd, base + i)) chosen = static_cast<int>(i);
  }
  while (chosen < 0 && high_water < static_cast<uint32_t>(kMaxProcesses)) {
    segment->header.process_high_water.store(high_water + 1);
    if (TryLockByte(fd, base + high_water)) chosen = static_cast<int>(high_water);
    ++high_water;
  }
  if (chosen < 0) return -1;
  ProcessEntry& process = segment->processes[chosen];
  process.generation.fetch_add(1);  // before anything else: lock-free readers see the reuse
  process.tenant.store(tenant);
  process.pid.store(pid);
  process.open_gpus.store(0);
  process.started_ns.store(MonotonicNanos());
  for (auto& charged : process.charged) charged.store(0);  // already zero: freed slots hold none
  ClearSchedState(process);
  process.state.store(kRegistered);
  return chosen;
}

void ReturnChargesAndFree(Segment* segment, int slot) {
  ProcessEntry& process = segment->processes[slot];
  const int tenant = process.tenant.load();
  uint32_t gpus = process.open_gpus.load();
  for (int g = 0; g < kMaxGpus; ++g) {
    if (process.charged[g].load() != 0) gpus |= 1u << g;
  }
  for (int g = 0; g < kMaxGpus; ++g) {
    if (!(gpus & (1u << g))) continue;
    if (tenant < 0 || tenant >= kMaxTenants) {  // corrupt: nothing to return the charge to
      process.charged[g].store(0);
      continue;
    }
    // Also visits ledgers this process opened without a charge: if it died holding one's mutex
    // mid-update, locking it here repairs the total.
    const int ledger = LedgerIndex(tenant, g);
    LedgerLock lock(segment, ledger);
    LedgerEntry& entry = segment->ledgers[ledger];
    const uint64_t charged = process.charged[g].load();
    const uint64_t used = entry.used.load();
    entry.used.store(used - std::min(charged, used));
    process.charged[g].store(0);
  }
  process.open_gpus.store(0);
  ClearSchedState(process);
  process.state.store(kFree);
}

int ReapDeadLocked(Segment* segment, int fd, int own_slot) {
  if (fd < 0) return 0;  // no descriptor to ask the kernel through: everyone would look dead
  int reaped = 0;
  const uint32_t high_water = HighWater(segment->header.process_high_water, kMaxProcesses);
  for (uint32_t i = 0; i < high_water; ++i) {
    if (static_cast<int>(i) == own_slot || !IsRegistered(segment->processes[i])) continue;
    if (IsByteLockedByOther(fd, kLivenessLockBase + i)) continue;
    ReturnChargesAndFree(segment, static_cast<int>(i));
    segment->header.processes_reaped.fetch_add(1, std::memory_order_relaxed);
    ++reaped;
  }
  return reaped;
}

bool OtherProcessHasLedgerOpen(const Segment& segment, int tenant, int gpu, int except_slot) {
  const uint32_t high_water = HighWater(segment.header.process_high_water, kMaxProcesses);
  for (uint32_t i = 0; i < high_water; ++i) {
    const ProcessEntry& process = segment.processes[i];
    if (static_cast<int>(i) != except_slot && IsRegistered(process) && process.tenant.load() == tenant &&
        (process.open_gpus.load() & (1u << gpu))) {
      return true;
    }
  }
  return false;
}

}  // namespace gpuslice::broker
