// GrantPolicy: what each tenant is charged for the device's time: the holder its busy time in
// the grant, the previous holder's tail and latency work done outside the grant their share of
// the time they ran beside others; charges move a tenant's virtual time, its limit's and
// priority's buckets and its service (and the share windows gpuslicectl reports), and the GPU's
// counters say where a grant's time went.
#include "broker/grant_policy.h"

#include <algorithm>

#include "broker/sched_lock.h"
#include "broker/sched_terms.h"
#include "common/clock.h"

namespace gpuslice::broker {
namespace {

constexpr uint32_t kRegistered = static_cast<uint32_t>(ProcessState::kRegistered);

// The part of `shared` that is the turn of `mine` out of `mine + theirs` (busy times, in ns).
uint64_t TurnOf(uint64_t shared, uint64_t mine, uint64_t theirs) {
  const unsigned __int128 total = static_cast<unsigned __int128>(mine) + theirs;
  if (total == 0) return shared / 2;
  return static_cast<uint64_t>(static_cast<unsigned __int128>(shared) * mine / total);
}

}  // namespace

void GrantPolicy::ChargeLocked(TenantIndex tenant, uint64_t ns, uint64_t since, uint64_t now, uint64_t limit_ns) {
  ChargeLocked(tenant, ns, since, now, limit_ns, ns);
}

void GrantPolicy::ChargeLocked(TenantIndex tenant, uint64_t ns, uint64_t since, uint64_t now, uint64_t limit_ns,
                               uint64_t unreported_ns) {
  LedgerEntry& l = Ledger(tenant);
  l.vtime.fetch_add(ns * kVtimeScale / WeightOf(l));
  l.service_ns.fetch_add(unreported_ns);
  const uint32_t limit = LimitOf(l);
  if (limit < 100) {
    l.tokens_ns.store(BucketAfterUse(l.tokens_ns.load(), l.tokens_at_ns.load(), limit, since, now, limit_ns));
    l.tokens_at_ns.store(now);
  }
}

uint64_t GrantPolicy::ChargePriorityWork(TenantIndex gate_tenant, uint64_t ns, uint64_t now, uint64_t wait_allowance_ns,
                                         uint32_t beside_at_least) {
  std::optional<SchedLock> lock;
  if (!Lock(&lock)) return 0;                       // not charged: no decision can be made meanwhile either
  const auto tenant = Tenant(gate_tenant.value());  // within the tenants registered so far
  if (!tenant) return 0;
  // Beside others' work the request first waits for the co-runners' queue — at most the budget
  // beside a latency tenant, which the caller's allowance stands for — and is charged nothing for
  // it; past it the hardware turns between the contexts with work (one per process) and the
  // tenant is charged its turn of that time: 1/(n+1) beside n processes' work, as what it used.
  // Charged for the queue as well, a service of many short requests would pay for that wait at
  // every request and run out of its request while within it; charged a flat half beside a
  // co-runner of several processes, it would pay for more of the device than it had.
  const auto holder = TenantOfGrantField(gpu_->holder.load());
  const uint32_t beside = std::max(ProcessesWithWorkBeside(*tenant, now), beside_at_least);
  const uint64_t waited = beside ? std::min(ns, wait_allowance_ns) : 0;
  const uint64_t charged = (ns - waited) / (beside + 1);
  const uint64_t began = now - std::min(now, ns);
  ChargeLocked(*tenant, charged, began, now, charged);
  // The charged part within the current grant is left out of the holder's charge where the
  // holder's busy time counted it too: a latency holder's own work (charged twice otherwise), and
  // another holder's time with work in flight beside it (time-sliced with this work). Beside a
  // holder with nothing in flight (its kernel done, its next launch held by the priority) this
  // work ran outside the holder's busy time; left out all the same, it came off the holder's
  // charge and let a limited co-runner pass its limit (0.59 of the device against 0.50, one
  // process beside a chain of four kernels).
  const bool counted_by_holder =
      // sabotage-point: idle-holder-credited-latency-work
      holder && (*holder == *tenant || beside_at_least > 0 || HasWorkInFlight(*holder, now));
  // sabotage-point: latency-work-charged-twice
  if (counted_by_holder) gpu_->overlap_ns.fetch_add(std::min(charged, Elapsed(gpu_->grant_start_ns.load(), now)));
  LedgerEntry& l = Ledger(*tenant);
  l.priority_tokens_ns.store(
      BucketAfterUse(l.priority_tokens_ns.load(), l.priority_tokens_at_ns.load(), WeightOf(l), began, now, charged));
  l.priority_tokens_at_ns.store(now);
  return waited;
}

void GrantPolicy::RollShareWindowLocked(uint64_t now) {
  const uint64_t window_start = gpu_->window_start_ns.load();
  if (window_start != 0 && now - window_start < kShareWindowNs) return;
  for (TenantIndex t : Tenants()) {
    LedgerEntry& l = Ledger(t);
    if (window_start != 0) {
      const uint64_t served = l.service_ns.load() - l.window_service_ns.load();
      l.last_share_ppm.store(served * 1'000'000 / (now - window_start));
    }
    l.window_service_ns.store(l.service_ns.load());
  }
  gpu_->window_start_ns.store(now);
}

// The previous holder's work that ran on beside the current grant (a tail) has completed, or
// the grant moves again. While the current holder also had work on the device the hardware
// turned between the contexts with work, one per process, and each tenant is charged its
// contexts' turn of that time: the tail's tenant m/(m+k) of it now, the current holder that much
// less at its hand-over, m and k their processes with work, each averaged over the tail (their
// busy time over its length, at least one). The rest of the tail ran alone and is the tail
// tenant's, whole: charged half of the whole tail, a limited tenant whose queued kernels ran on
// past another's short request would use more of the device than its limit. Charged a flat half
// of the overlap whatever its processes, a tenant of two processes whose tails ran beside a
// synchronous service kept 0.59 of the device against the service's 0.41 at equal requests.
void GrantPolicy::SettleTailLocked(uint64_t now, bool force) {
  const uint32_t field = gpu_->tail_holder.load();
  if (field == 0) return;
  const auto tail = TenantOfGrantField(field);
  if (!tail) {  // not a tenant: a corrupt value is dropped
    gpu_->tail_holder.store(0);
    return;
  }
  if (!force && HolderActivity(*tail, now) == Activity::kDraining) return;
  const uint64_t since = gpu_->tail_since_ns.load();
  const uint64_t elapsed = Elapsed(since, now);
  // The tail began at the current grant's hand-over: the holder's busy time since then.
  const auto holder = TenantOfGrantField(gpu_->holder.load());
  uint64_t shared = 0;
  uint64_t holder_busy = 0;
  if (holder && gpu_->grant_start_ns.load() == since) {
    const uint64_t busy = TenantBusyNs(*holder, now);
    const uint64_t at_grant = gpu_->holder_busy_at_grant_ns.load();
    holder_busy = busy > at_grant ? busy - at_grant : 0;
    shared = std::min(elapsed, holder_busy);
  }
  const uint64_t tail_now = TenantBusyNs(*tail, now);
  const uint64_t tail_at_since = gpu_->tail_busy_at_since_ns.load();
  const uint64_t tail_busy = tail_now > tail_at_since ? tail_now - tail_at_since : 0;
  // sabotage-point: tail-charged-half-whatever-the-contexts
  const uint64_t tail_turn = TurnOf(shared, std::max(elapsed, tail_busy), std::max(elapsed, holder_busy));
  const uint64_t charged = elapsed - shared + tail_turn;
  ChargeLocked(*tail, charged, since, now, charged);
  gpu_->overlap_ns.fetch_add(tail_turn);
  gpu_->tail_holder.store(0);
}

// Where the ending grant's time went: from its start to the holder's first launch (the
// hand-over's own cost: waking the new holder, its first launch), the rest of the time its
// holder had nothing in flight, and the drain from the gate's closing.
void GrantPolicy::CountGrantTimeLocked(uint64_t start, uint64_t used, uint64_t now) {
  const uint64_t held = Elapsed(start, now);
  const uint64_t first = gpu_->first_work_ns.load();
  const uint64_t start_idle = first >= start && first <= now ? first - start : held;  // no launch: all of it
  gpu_->grant_start_idle_ns.fetch_add(start_idle);
  gpu_->holder_idle_ns.fetch_add(held - std::min(held, start_idle + used));
  const uint64_t closed = gpu_->closed_at_ns.load();
  if (closed != 0) gpu_->drain_ns.fetch_add(Elapsed(closed, now));
}

// Charged the time its processes had work on the GPU during the grant — not the gaps of a
// launcher that leaves the device idle between kernels, not time it held the GPU idle or after it
// died (up to its last activity) — less time already charged to others beside it (latency work,
// the previous holder's tail).
uint64_t GrantPolicy::HolderUsedLocked(TenantIndex holder, uint64_t now, uint64_t* busy_ns) const {
  const uint64_t start = gpu_->grant_start_ns.load();
  const uint64_t active = std::clamp(gpu_->holder_active_ns.load(), start, now);
  const uint64_t busy_now = TenantBusyNs(holder, now);
  const uint64_t at_grant = gpu_->holder_busy_at_grant_ns.load();
  const uint64_t busy = busy_now > at_grant ? busy_now - at_grant : 0;
  if (busy_ns) *busy_ns = busy;
  // sabotage-point: idle-charged
  const uint64_t used = std::min(active - start, busy);
  return used - std::min(used, gpu_->overlap_ns.load());
}

void GrantPolicy::ReportHolderServiceLocked(TenantIndex holder, uint64_t now) {
  if (now - last_report_ns_ < kServiceReportNs) return;
  last_report_ns_ = now;
  const uint64_t used = HolderUsedLocked(holder, now);
  const uint64_t reported = gpu_->holder_reported_ns.load();
  if (used <= reported) return;
  Ledger(holder).service_ns.fetch_add(used - reported);
  gpu_->holder_reported_ns.store(used);
}

}  // namespace gpuslice::broker
