#include "broker/grant_policy.h"

#include <algorithm>
#include <thread>

#include "broker/ledger.h"
#include "broker/lock_fault.h"
#include "common/futex.h"
#include "common/robust_mutex.h"

namespace gpuslice::broker {
namespace {

constexpr uint32_t kRegistered = static_cast<uint32_t>(ProcessState::kRegistered);

uint64_t Elapsed(uint64_t since, uint64_t now) { return now > since ? now - since : 0; }

}  // namespace

// Holds the GPU's scheduler mutex, waiting at most `timeout_ns`. Nothing it guards needs repair
// after an owner died: every field is rewritten whole by the next decision. Not taken (a holder
// stopped inside a decision, a corrupt lock), nothing it guards may be touched.
class SchedLock {
 public:
  SchedLock(GpuEntry* gpu, uint64_t timeout_ns) : lock_(&gpu->sched_mutex.mutex, timeout_ns) {}
  [[nodiscard]] bool locked() const { return lock_.locked(); }
  LockFailure failure() const { return lock_.failure(); }

 private:
  RobustLock lock_;
};

uint64_t QuantumOf(const GpuEntry& gpu) {
  const uint64_t quantum = gpu.quantum_ns.load(std::memory_order_relaxed);
  return quantum ? quantum : kDefaultQuantumNs;
}

uint64_t BudgetOf(const GpuEntry& gpu) {
  const uint64_t budget = gpu.budget_ns.load(std::memory_order_relaxed);
  return budget ? budget : kDefaultBudgetNs;
}

uint64_t LeaseOf(const GpuEntry& gpu) { return std::max(2 * QuantumOf(gpu), kMinLeaseNs); }

// sabotage-point: sched-lock-unbounded
uint64_t SchedLockTimeoutNs() { return std::min(kSchedLockBoundNs, LockTimeoutNs()); }

std::string SchedLockName(GpuIndex gpu) { return "the scheduler lock of GPU entry " + std::to_string(gpu.value()); }

std::string SchedLockFaultLine(const Segment* segment, GpuIndex gpu, LockFailure failure, const std::string& refused) {
  return LockFaultLine(segment, SchedLockName(gpu), failure, refused, SchedLockTimeoutNs());
}

void WakeGrantWaiters(GpuEntry* gpu) {
  gpu->grant_seq.fetch_add(1);
  FutexWakeAll(&gpu->grant_seq);
}

uint32_t WeightOf(const LedgerEntry& ledger) {
  const uint32_t request = ledger.request_pct.load(std::memory_order_relaxed);
  // sabotage-point: weights-ignored
  return request ? std::min<uint32_t>(request, 100) : kDefaultRequestPct;
}

uint32_t LimitOf(const LedgerEntry& ledger) {
  const uint32_t limit = ledger.limit_pct.load(std::memory_order_relaxed);
  // sabotage-point: limits-ignored
  return limit ? std::min<uint32_t>(limit, 100) : 100;
}

ComputeClass ClassOf(const LedgerEntry& ledger) {
  const uint32_t value = ledger.compute_class.load(std::memory_order_relaxed);
  // sabotage-point: classes-ignored
  return value <= static_cast<uint32_t>(ComputeClass::kBackground) ? static_cast<ComputeClass>(value)
                                                                   : ComputeClass::kStandard;
}

int64_t BucketNow(int64_t tokens, uint64_t tokens_at, uint32_t pct, uint64_t now) {
  const int64_t cap = static_cast<int64_t>(kBucketWindowNs * pct / 100);
  // Debt is repaid in full: a grant that ran past the bucket (the drain of long kernels) is paid
  // back at pct % of real time before the tenant is eligible again, so the limit holds on
  // average. The gain must not be capped below any debt a charge can leave: a tenant charged one
  // long grant would then never get back to its burst, and its waiting process would hang for
  // good (its bucket is not recharged, so tokens_at does not move, while it waits). The bound on
  // the elapsed time (11 days) only keeps the product in range.
  constexpr uint64_t kMaxElapsedNs = 1'000'000'000'000'000ULL;
  const int64_t gained = static_cast<int64_t>(std::min(Elapsed(tokens_at, now), kMaxElapsedNs) * pct / 100);
  return std::min(tokens + gained, cap);
}

GrantPolicy::GrantPolicy(Segment* segment, GpuIndex gpu, Liveness alive)
    : segment_(segment), gpu_(&At(*segment, gpu)), gpu_index_(gpu), alive_(std::move(alive)) {}

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

int GrantPolicy::CountWaitingTenants(int except, uint64_t now) const {
  int count = 0;
  for (TenantIndex t : Tenants()) {
    if (t.value() == except) continue;
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

// The system's virtual time: the holder's, including the grant it holds now.
uint64_t GrantPolicy::SystemVtime(uint64_t now) const {
  uint64_t v = gpu_->vclock.load();
  if (const auto holder = TenantOfGrantField(gpu_->holder.load())) {
    const LedgerEntry& h = Ledger(*holder);
    v = std::max(v, h.vtime.load() + Elapsed(gpu_->grant_start_ns.load(), now) * kVtimeScale / WeightOf(h));
  }
  return v;
}

// The system's virtual time, but no further on than the furthest-behind other tenant that waits
// and could be granted the GPU (not over its limit, not background). A holder of a small request
// runs the system's clock fast (virtual time advances by service / request), so measured against
// the holder alone, a tenant back from idle would re-enter ahead of a waiting tenant of a large
// request and then wait for that tenant's quanta to catch up with it.
uint64_t GrantPolicy::ReentryVtime(TenantIndex entering, const uint32_t* counts, uint64_t now) const {
  uint64_t v = SystemVtime(now);
  for (TenantIndex u : Tenants()) {
    if (u == entering || counts[u.value()] == 0) continue;
    const LedgerEntry& l = Ledger(u);
    if (ClassOf(l) == ComputeClass::kBackground || RefillNs(l, now) != 0) continue;
    v = std::min(v, l.vtime.load());
  }
  return v;
}

void GrantPolicy::RefreshWaitingLocked(uint64_t now) {
  uint32_t counts[kMaxTenants] = {};
  for (ProcessSlot slot : Processes()) {
    const ProcessEntry& p = At(*segment_, slot);
    const auto t = Tenant(p.tenant.load());
    if (p.state.load() != kRegistered || !t) continue;
    // sabotage-point: dead-waiters-count
    if (Fresh(p, At(p.sched, gpu_index_).waiting_ns.load(), now) && Live(slot)) ++counts[t->value()];
  }
  uint32_t total = 0;
  for (TenantIndex t : Tenants()) {
    const uint32_t count = counts[t.value()];
    LedgerEntry& l = Ledger(t);
    const uint32_t before = l.waiting.exchange(count);
    const bool holds = TenantOfGrantField(gpu_->holder.load()) == t;
    // sabotage-point: over-limit-lag-kept
    if (count != 0 && !holds && (before == 0 || RefillNs(l, now) != 0)) {
      // It starts waiting: credit for the time it did not want the GPU is bounded, so a tenant
      // that slept for an hour re-enters at most two quanta behind the system's virtual time
      // (the holder's, including its current grant; ReentryVtime) instead of monopolising the
      // GPU to catch up. While it waits over its limit it is given no credit at all: its own
      // ceiling, not the others, held it back, and what it fell behind meanwhile is not owed to
      // it. Left to lag, a tenant limited to its request would fall ever further behind the
      // system (the others use more than their requests), be granted first whenever its bucket
      // refilled, and never be the holder a waiter is owed the GPU against: a request arriving
      // during its grant would wait for the whole burst and the drain.
      const uint64_t credit = before == 0 ? 2 * QuantumOf(*gpu_) * kVtimeScale / WeightOf(l) : 0;
      // sabotage-point: reentry-against-holder-clock
      const uint64_t system = ReentryVtime(t, counts, now);
      const bool clamped = system > credit && l.vtime.load() < system - credit;
      if (clamped) l.vtime.store(system - credit);
      // Back from idle: a whole credit behind (a service between requests), not a tenant that
      // merely lost the grant and waits again, level with the others.
      l.back_from_idle.store(before == 0 && clamped ? 1 : 0);
    }
    total += count;
  }
  gpu_->waiting.store(total);
}

// 0 when the tenant may be granted the GPU; over its limit, how long until its bucket holds a
// burst again.
uint64_t GrantPolicy::RefillNs(const LedgerEntry& l, uint64_t now) {
  const uint32_t limit = LimitOf(l);
  if (limit >= 100) return 0;
  const int64_t tokens = BucketNow(l.tokens_ns.load(), l.tokens_at_ns.load(), limit, now);
  const int64_t burst = std::min(kMinLimitedBurstNs, static_cast<int64_t>(kBucketWindowNs * limit / 100));
  return tokens < burst ? static_cast<uint64_t>(burst - tokens) * 100 / limit + 1 : 0;
}

// The waiting, eligible tenant furthest below its entitlement (smallest virtual time); standard
// and latency tenants before background ones.
std::optional<TenantIndex> GrantPolicy::PickNext(uint64_t now, uint64_t* retry_after_ns) {
  std::optional<TenantIndex> best, best_background;
  uint64_t best_vtime = UINT64_MAX, best_background_vtime = UINT64_MAX;
  *retry_after_ns = 0;
  for (TenantIndex t : Tenants()) {
    LedgerEntry& l = Ledger(t);
    if (l.waiting.load() == 0) continue;
    if (const uint64_t until = RefillNs(l, now); until != 0) {
      if (*retry_after_ns == 0 || until < *retry_after_ns) *retry_after_ns = until;
      continue;  // over its limit: not eligible until its bucket refills
    }
    const uint64_t v = l.vtime.load();
    if (ClassOf(l) == ComputeClass::kBackground) {
      if (v < best_background_vtime) best_background_vtime = v, best_background = t;
    } else if (v < best_vtime) {
      best_vtime = v, best = t;
    }
  }
  return best ? best : best_background;
}

void GrantPolicy::ChargeLocked(TenantIndex tenant, uint64_t ns, uint64_t now, uint64_t limit_ns) {
  ChargeLocked(tenant, ns, now, limit_ns, ns);
}

void GrantPolicy::ChargeLocked(TenantIndex tenant, uint64_t ns, uint64_t now, uint64_t limit_ns,
                               uint64_t unreported_ns) {
  LedgerEntry& l = Ledger(tenant);
  l.vtime.fetch_add(ns * kVtimeScale / WeightOf(l));
  l.service_ns.fetch_add(unreported_ns);
  const uint32_t limit = LimitOf(l);
  if (limit < 100) {
    l.tokens_ns.store(BucketNow(l.tokens_ns.load(), l.tokens_at_ns.load(), limit, now) -
                      static_cast<int64_t>(limit_ns));
    l.tokens_at_ns.store(now);
  }
}

bool GrantPolicy::Lock(std::optional<SchedLock>* lock) {
  // Once the lock was found stuck, later attempts only try it: every launch of every waiter
  // would otherwise wait out the bound again.
  lock->emplace(gpu_, stuck_.load(std::memory_order_relaxed) ? 0 : SchedLockTimeoutNs());
  if ((*lock)->locked()) {
    stuck_.store(false, std::memory_order_relaxed);
    return true;
  }
  const LockFailure failure = (*lock)->failure();
  lock->reset();
  if (!stuck_.exchange(true)) {
    ReportLockFault(segment_, &gpu_->sched_mutex, SchedLockName(gpu_index_), failure,
                    "launches on that GPU are not gated while it stays so", SchedLockTimeoutNs());
  }
  return false;
}

uint64_t GrantPolicy::ChargePriorityWork(int raw_tenant, uint64_t ns, uint64_t now, uint64_t wait_allowance_ns) {
  std::optional<SchedLock> lock;
  if (!Lock(&lock)) return 0;  // not charged: no decision can be made meanwhile either
  const auto tenant = Tenant(raw_tenant);
  if (!tenant) return 0;
  // Beside others' work the request first waits for the co-runners' queue — at most the budget
  // beside a latency tenant, which the caller's allowance stands for — and is charged nothing for
  // it; past it the hardware turns between the contexts with work (one per process) and the
  // tenant is charged its turn of that time: 1/(n+1) beside n processes' work, as what it used.
  // Charged for the queue as well, a service of many short requests would pay for that wait at
  // every request and run out of its request while within it; charged a flat half beside a
  // co-runner of several processes, it would pay for more of the device than it had.
  const auto holder = TenantOfGrantField(gpu_->holder.load());
  const uint32_t beside = ProcessesWithWorkBeside(*tenant, now);
  const uint64_t waited = beside ? std::min(ns, wait_allowance_ns) : 0;
  const uint64_t charged = (ns - waited) / (beside + 1);
  ChargeLocked(*tenant, charged, now, charged);
  // The charged part within the current grant is not the holder's (nor, for a latency holder,
  // its grant's a second time): the holder's charge leaves it out.
  // sabotage-point: latency-work-charged-twice
  if (holder) gpu_->overlap_ns.fetch_add(std::min(charged, Elapsed(gpu_->grant_start_ns.load(), now)));
  LedgerEntry& l = Ledger(*tenant);
  l.priority_tokens_ns.store(BucketNow(l.priority_tokens_ns.load(), l.priority_tokens_at_ns.load(), WeightOf(l), now) -
                             static_cast<int64_t>(charged));
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
// time-sliced the two, and each is charged half of that time — the tail's tenant now, the
// current holder by that much less at its hand-over; the rest of the tail ran alone and is the
// tail tenant's: charged half of the whole tail, a limited tenant whose queued kernels ran on past
// another's short request would use more of the device than its limit.
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
  if (holder && gpu_->grant_start_ns.load() == since) {
    const uint64_t busy = TenantBusyNs(*holder, now);
    const uint64_t at_grant = gpu_->holder_busy_at_grant_ns.load();
    shared = std::min(elapsed, busy > at_grant ? busy - at_grant : 0);
  }
  const uint64_t charged = elapsed - shared / 2;
  ChargeLocked(*tail, charged, now, charged);
  gpu_->overlap_ns.fetch_add(shared / 2);
  gpu_->tail_holder.store(0);
}

// Without asking liveness (a system call per process; this runs at every charge of latency
// work): a process that died with work in flight stops counting when its heartbeat goes stale.
uint32_t GrantPolicy::ProcessesWithWorkBeside(TenantIndex tenant, uint64_t now) const {
  uint32_t processes = 0;
  for (ProcessSlot slot : Processes()) {
    const ProcessEntry& p = At(*segment_, slot);
    if (p.state.load() != kRegistered || p.tenant.load() == tenant.value()) continue;
    const ProcessGpuState& st = At(p.sched, gpu_index_);
    if (st.inflight.load() != 0 && Fresh(p, st.heartbeat_ns.load(), now)) ++processes;
  }
  return processes;
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

void GrantPolicy::HandOverLocked(uint64_t now) {
  SettleTailLocked(now, /*force=*/true);
  const uint64_t start = gpu_->grant_start_ns.load();
  if (const auto holder = TenantOfGrantField(gpu_->holder.load())) {
    uint64_t busy = 0;
    const uint64_t charged = HolderUsedLocked(*holder, now, &busy);
    const uint64_t reported = gpu_->holder_reported_ns.load();
    ChargeLocked(*holder, charged, now, charged, charged - std::min(charged, reported));
    CountGrantTimeLocked(start, std::min(busy, Elapsed(start, now)), now);
  }
  gpu_->first_work_ns.store(0);
  gpu_->closed_at_ns.store(0);
  gpu_->overlap_ns.store(0);
  gpu_->holder_reported_ns.store(0);
  RollShareWindowLocked(now);
  uint64_t retry_after = 0;
  const std::optional<TenantIndex> next = PickNext(now, &retry_after);
  if (next) {
    LedgerEntry& chosen = Ledger(*next);
    gpu_->vclock.store(std::max(gpu_->vclock.load(), chosen.vtime.load()));
    gpu_->grants.fetch_add(1);
    chosen.grants_received.fetch_add(1);
    chosen.back_from_idle.store(0);
  }
  gpu_->grant_start_ns.store(now);
  gpu_->holder_active_ns.store(now);
  gpu_->holder_busy_at_grant_ns.store(next ? TenantBusyNs(*next, now) : 0);
  gpu_->closing.store(0);
  gpu_->holder.store(next ? static_cast<uint32_t>(next->value() + 1) : 0);
}

// A waiter far enough below the holder in virtual time need not wait out the whole quantum:
// after a minimum slice the grant ends as soon as the waiter, given one more quantum, would still
// be behind the holder. Between tenants that stay busy this never triggers before a full
// quantum; a tenant that was idle (a service between requests) re-enters behind, and so gets the
// GPU after one minimum slice and the holder's bounded drain.
bool GrantPolicy::Owed(TenantIndex waiter, TenantIndex holder, uint64_t held) const {
  if (held < kMinSliceNs) return false;
  const LedgerEntry& h = Ledger(holder);
  const LedgerEntry& w = Ledger(waiter);
  const uint64_t holder_vtime = h.vtime.load() + held * kVtimeScale / WeightOf(h);
  // For a waiter back from idle, a quantum at the larger of the two weights: at the holder's
  // alone, a waiter of a larger request than a small holder's would be owed nothing for several
  // of its own quanta (one quantum at the holder's small weight is several at the waiter's in
  // virtual time). Not for every waiter: a busy waiter of a large request level with a holder of
  // a small one would cut the holder's grants short, and the queued kernels of each would run on
  // beside the next grant, where their device time is charged only roughly.
  // sabotage-point: owed-at-holder-weight
  // sabotage-point: owed-at-larger-weight-always
  const uint32_t weight = w.back_from_idle.load() ? std::max(WeightOf(h), WeightOf(w)) : WeightOf(h);
  const uint64_t quantum_vtime = QuantumOf(*gpu_) * kVtimeScale / weight;
  return w.vtime.load() + quantum_vtime < holder_vtime;
}

GrantPolicy::CloseReason GrantPolicy::ShouldCloseLocked(TenantIndex holder, uint64_t now) const {
  const LedgerEntry& h = Ledger(holder);
  const uint64_t start = gpu_->grant_start_ns.load();
  const uint64_t held = Elapsed(start, now);
  const uint32_t limit = LimitOf(h);
  bool at_limit = false;
  if (limit < 100) {
    // The bucket as the grant began, plus what it gained while held, less the time held.
    const int64_t at_start = BucketNow(h.tokens_ns.load(), h.tokens_at_ns.load(), limit, start);
    at_limit = at_start + static_cast<int64_t>(held * limit / 100) <= static_cast<int64_t>(held);
  }
  // A waiter owed the GPU is yielded to even by a holder at its limit: the holder's grant moves
  // at once instead of after its drain (the waiter would otherwise wait for the holder's whole
  // queue), and what the holder still has queued is charged to its bucket as a tail.
  const bool background = ClassOf(h) == ComputeClass::kBackground;
  CloseReason reason = at_limit ? CloseReason::kLimit : CloseReason::kNone;
  for (TenantIndex t : Tenants()) {
    if (t == holder) continue;
    const LedgerEntry& w = Ledger(t);
    // A waiter over its limit cannot take the grant: closing for it would hand the GPU to nobody
    // while the holder's queued kernels ran on uncharged, and a limited holder would take more
    // than its limit.
    // sabotage-point: owed-over-limit
    // sabotage-point: over-limit-yield-uncharged.yield
    if (w.waiting.load() == 0 || RefillNs(w, now) != 0) continue;
    const bool waiter_background = ClassOf(w) == ComputeClass::kBackground;
    if (background && !waiter_background) return CloseReason::kYield;  // background yields at once
    if (waiter_background && !background) continue;                    // and is never owed anything
    if (Owed(t, holder, held)) return CloseReason::kYield;
    if (!at_limit && held >= QuantumOf(*gpu_)) reason = CloseReason::kQuantum;
  }
  return reason;
}

// Whether the holder's grant, closed for `reason`, may move on with `queued` of its launches still
// in flight (docs/scheduling.md, "Hand-over"). Its limit reached, only once they have all
// finished: a limit is a ceiling. At the end of its quantum, once its last kernel runs: the next
// holder's first kernel then queues behind it and the device does not go idle while the grant
// moves (a hand-over costs the wake-up of the next holder and its first launch, the length of a
// decision; drained to nothing, the device idled for all of it). Yielding to a waiter owed the
// GPU (or to anyone, from background), at once: the waiter's work joins what the holder has
// queued — at most its budget — time-sliced by the hardware as it would be without gpuslice, so
// a light tenant's request waits for no one's queue; the holder launches nothing more meanwhile.
// Work that runs on beside the next grant is a tail (SettleTailLocked), charged to the holder —
// to a limited holder's bucket too, so its limit holds over the bucket's window. A limited
// holder yields at once like any other (a waiter below its request must not wait for a
// holder's queue because the holder declared a ceiling); at the end of its quantum or at its
// limit it drains fully: nobody is owed the GPU then, and a tail's device time is known only
// roughly (how the hardware time-slices two contexts' kernels is not seen).
bool GrantPolicy::DrainedFor(CloseReason reason, Activity activity, uint32_t queued, bool limited) {
  if (activity != Activity::kDraining) return true;
  switch (reason) {
    // sabotage-point: yield-drains
    // sabotage-point: limited-yield-drains
    case CloseReason::kYield: return true;
    case CloseReason::kQuantum: return !limited && queued <= 1;
    case CloseReason::kLimit:
    case CloseReason::kNone: return false;
  }
  return false;
}

bool GrantPolicy::AdvanceLocked(uint64_t now) {
  bool changed = false;
  RefreshWaitingLocked(now);
  SettleTailLocked(now, /*force=*/false);
  if (gpu_->priority.load() != 0 && !PriorityActive(now)) {
    gpu_->priority.store(0);
    changed = true;
  }
  const uint32_t field = gpu_->holder.load();
  const auto holder = TenantOfGrantField(field);
  if (field != 0 && !holder) {  // not a tenant: a corrupt value is dropped, not followed
    gpu_->holder.store(0);
    changed = true;
  }
  if (!holder) {
    // Tenants wait and nobody holds the GPU: all of them over their limits (the time since the
    // last decision, at most a lease, counts).
    if (gpu_->waiting.load() != 0)
      gpu_->unheld_waiting_ns.fetch_add(std::min(Elapsed(gpu_->last_decision_ns.load(), now), LeaseOf(*gpu_)));
    uint64_t retry_after = 0;
    if (PickNext(now, &retry_after)) {
      HandOverLocked(now);
      changed = true;
    }
    return changed;
  }
  const TenantIndex h = *holder;
  uint64_t went_idle = 0;
  Activity activity = HolderActivity(h, now, &went_idle);
  if (activity == Activity::kGone) {
    HandOverLocked(now);
    return true;
  }
  // What the holder is charged to: now while it has work, else when its last process went idle.
  const bool working = activity == Activity::kDraining || activity == Activity::kWaiting;
  const uint64_t active = working ? now : std::min(went_idle, now);
  if (active > gpu_->holder_active_ns.load()) gpu_->holder_active_ns.store(active);
  // sabotage-point: holder-service-unreported
  ReportHolderServiceLocked(h, now);
  const CloseReason reason = ShouldCloseLocked(h, now);
  const bool close = reason != CloseReason::kNone;
  const bool settled = Elapsed(gpu_->grant_start_ns.load(), now) >= kMinGraceNs;  // a new holder's first launch
  if (!close && !(activity == Activity::kIdle && settled)) {
    // Nothing closes the grant now: a gate closed for a reason that is gone (the waiter it was
    // closed for left, died or exited while its thread waited) opens again. Left closed, the
    // holder's own launches would wait for its own grant for ever: its waiting thread keeps it
    // from looking idle, and no hand-over comes without a waiter.
    // sabotage-point: closing-kept-for-gone-waiter
    if (gpu_->closing.exchange(0) != 0) changed = true;
    gpu_->closed_at_ns.store(0);
    return changed;
  }
  // Close the gate before the last look at the holder: a launch either sees it closed, or the
  // look sees the launch's in-flight count (docs/scheduling.md, "no overlap").
  const bool was_closing = gpu_->closing.exchange(1) != 0;
  if (close && !was_closing) changed = true;
  if (close && gpu_->closed_at_ns.load() == 0) gpu_->closed_at_ns.store(now);
  uint32_t queued = 0;
  activity = HolderActivity(h, now, nullptr, &queued);
  const bool limited = LimitOf(Ledger(h)) < 100;
  if ((close && DrainedFor(reason, activity, queued, limited)) || activity == Activity::kIdle ||
      activity == Activity::kGone) {
    HandOverLocked(now);
    const uint32_t next = gpu_->holder.load();
    // Its kernels run on beside the next grant, or with nobody holding the GPU: a tail, charged to it.
    // sabotage-point: over-limit-yield-uncharged.tail
    if (activity == Activity::kDraining && next != field) {
      gpu_->tail_holder.store(field);
      gpu_->tail_since_ns.store(now);
    }
    return true;
  }
  if (!close) {  // an idleness probe that found work; a gate closed earlier for a waiter now gone
    gpu_->closing.store(0);
    gpu_->closed_at_ns.store(0);
    if (was_closing) changed = true;
  }
  return changed;
}

bool GrantPolicy::Advance(uint64_t now) {
  std::optional<SchedLock> lock;
  if (!Lock(&lock)) return false;
  std::fill(std::begin(live_cache_), std::end(live_cache_), 0);
  decider_.store(std::this_thread::get_id(), std::memory_order_relaxed);
  const bool changed = AdvanceLocked(now);
  decider_.store(std::thread::id(), std::memory_order_relaxed);
  gpu_->last_decision_ns.store(now);
  return changed;
}

void GrantPolicy::ReleaseIfHeldBy(int tenant, uint64_t now) {
  std::optional<SchedLock> lock;
  if (!Lock(&lock)) return;
  if (TenantOfGrantField(gpu_->holder.load()) != Tenant(tenant) || !Tenant(tenant)) return;
  HandOverLocked(now);
}

}  // namespace gpuslice::broker
