// GrantPolicy: who is on the GPU and what their processes do, as the shared segment shows it
// (which tenants wait, whether the holder has work, is between launches, idle or gone; liveness
// asked at most once per decision). The checked ways into the segment's entries are here too.
#include "broker/grant_policy.h"

#include <algorithm>
#include <thread>

#include "broker/sched_terms.h"
#include "common/clock.h"

namespace gpuslice::broker {
namespace {

constexpr uint32_t kRegistered = static_cast<uint32_t>(ProcessState::kRegistered);

}  // namespace

uint32_t GrantPolicy::TenantHighWater() const {
  return std::min<uint32_t>(segment_->header.tenant_high_water.load(), kMaxTenants);
}

IndexRange<ProcessSlot> GrantPolicy::Processes() const { return UsedProcessSlots(*segment_); }

IndexRange<TenantIndex> GrantPolicy::Tenants() const { return UsedTenants(*segment_); }

LedgerEntry& GrantPolicy::Ledger(TenantIndex tenant) const { return At(*segment_, LedgerId::Of(tenant, gpu_index_)); }

std::optional<TenantIndex> GrantPolicy::Tenant(int raw) const {
  return raw >= 0 && static_cast<uint32_t>(raw) < TenantHighWater() ? TenantIndex::From(raw) : std::nullopt;
}

std::optional<TenantIndex> GrantPolicy::TenantOfGrantField(uint32_t field) const {
  return field == 0 ? std::nullopt : Tenant(static_cast<int>(std::min<uint32_t>(field - 1, INT32_MAX)));
}

// Within one decision a process's liveness is asked once (it is a system call).
bool GrantPolicy::Live(ProcessSlot slot) const {
  if (decider_.load(std::memory_order_relaxed) != std::this_thread::get_id()) return alive_(slot);
  int8_t& known = live_cache_[slot.value()];
  if (known == 0) known = alive_(slot) ? 1 : -1;
  return known > 0;
}

bool GrantPolicy::Fresh(const ProcessEntry&, uint64_t stamp, uint64_t now) const {
  return stamp != 0 && (stamp >= now || now - stamp < LeaseOf(*gpu_));
}

GrantPolicy::Activity GrantPolicy::HolderActivity(TenantIndex tenant, uint64_t now, uint64_t* went_idle_ns,
                                                  uint32_t* queued) const {
  bool live = false, draining = false, waiting = false, between = false;
  uint64_t went_idle = 0;
  for (ProcessSlot slot : Processes()) {
    const ProcessEntry& p = At(*segment_, slot);
    if (p.state.load() != kRegistered || p.tenant.load() != tenant.value()) continue;
    const ProcessGpuState& st = At(p.sched, gpu_index_);
    const uint32_t inflight = st.inflight.load();
    const uint64_t waiting_ns = st.waiting_ns.load();
    if (inflight == 0 && waiting_ns == 0 && st.idle_since_ns.load() == 0) continue;  // never used the GPU
    if (!Live(slot)) continue;
    live = true;
    // sabotage-point: lease-ignored
    if (inflight != 0 && Fresh(p, st.heartbeat_ns.load(), now)) {
      draining = true;
      // Work of unknown extent counts as more than one kernel.
      if (queued) *queued += (inflight & kUntrackedWork) ? 2u : QueuedLaunches(inflight);
    }
    if (Fresh(p, waiting_ns, now)) waiting = true;
    const uint64_t grace = std::clamp<uint64_t>(st.grace_ns.load(), kMinGraceNs, kMaxGraceNs);
    // sabotage-point: idle-between-launches
    if (inflight == 0 && Elapsed(st.idle_since_ns.load(), now) < grace) between = true;
    if (inflight == 0) went_idle = std::max(went_idle, st.idle_since_ns.load());
  }
  if (went_idle_ns) *went_idle_ns = went_idle;
  if (draining) return Activity::kDraining;
  if (waiting) return Activity::kWaiting;
  if (between) return Activity::kBetweenLaunches;
  return live ? Activity::kIdle : Activity::kGone;
}

int GrantPolicy::CountWaitingTenants(TenantIndex except, uint64_t now) const {
  int count = 0;
  for (TenantIndex t : Tenants()) {
    if (t == except) continue;
    for (ProcessSlot slot : Processes()) {
      const ProcessEntry& p = At(*segment_, slot);
      if (p.state.load() != kRegistered || p.tenant.load() != t.value()) continue;
      if (!Fresh(p, At(p.sched, gpu_index_).waiting_ns.load(), now) || !Live(slot)) continue;
      ++count;
      break;
    }
  }
  return count;
}

bool GrantPolicy::PriorityActive(uint64_t now) const {
  for (ProcessSlot slot : Processes()) {
    const ProcessEntry& p = At(*segment_, slot);
    if (p.state.load() != kRegistered) continue;
    if (At(p.sched, gpu_index_).priority_until_ns.load() > now && Live(slot)) return true;
  }
  return false;
}

// Without asking liveness (a system call per process; this runs at every charge of latency
// work): a process that died with work in flight stops counting when its heartbeat goes stale.
bool GrantPolicy::HasFreshWork(const ProcessEntry& p, uint64_t now) const {
  if (p.state.load() != kRegistered) return false;
  const ProcessGpuState& st = At(p.sched, gpu_index_);
  return st.inflight.load() != 0 && Fresh(p, st.heartbeat_ns.load(), now);
}

uint32_t GrantPolicy::ProcessesWithWorkBeside(TenantIndex tenant, uint64_t now) const {
  uint32_t processes = 0;
  for (ProcessSlot slot : Processes()) {
    const ProcessEntry& p = At(*segment_, slot);
    if (p.tenant.load() != tenant.value() && HasFreshWork(p, now)) ++processes;
  }
  return processes;
}

bool GrantPolicy::HasWorkInFlight(TenantIndex tenant, uint64_t now) const {
  for (ProcessSlot slot : Processes()) {
    const ProcessEntry& p = At(*segment_, slot);
    if (p.tenant.load() == tenant.value() && HasFreshWork(p, now)) return true;
  }
  return false;
}

uint64_t GrantPolicy::TenantBusyNs(TenantIndex tenant, uint64_t now) const {
  uint64_t busy = 0;
  for (ProcessSlot slot : Processes()) {
    const ProcessEntry& p = At(*segment_, slot);
    if (p.state.load() != kRegistered || p.tenant.load() != tenant.value()) continue;
    const ProcessGpuState& st = At(p.sched, gpu_index_);
    busy += st.busy_total_ns.load();
    if (st.inflight.load() != 0) busy += Elapsed(st.busy_since_ns.load(), now);  // a period still open
  }
  return busy;
}

}  // namespace gpuslice::broker
