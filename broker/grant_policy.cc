// GrantPolicy: the decision. Under the GPU's scheduler lock, one step counts who waits, settles
// what must be charged, ends the holder's grant when it must end and hands the GPU on once the
// holder has drained, is idle or is gone (docs/scheduling.md, "Hand-over").
#include "broker/grant_policy.h"

#include <algorithm>
#include <thread>

#include "broker/lock_fault.h"
#include "broker/sched_lock.h"
#include "broker/sched_terms.h"
#include "common/clock.h"

namespace gpuslice::broker {

GrantPolicy::GrantPolicy(Segment* segment, GpuIndex gpu, Liveness alive)
    : segment_(segment), gpu_(&At(*segment, gpu)), gpu_index_(gpu), alive_(std::move(alive)) {}

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

void GrantPolicy::HandOverLocked(uint64_t now) {
  SettleTailLocked(now, /*force=*/true);
  const uint64_t start = gpu_->grant_start_ns.load();
  if (const auto holder = TenantOfGrantField(gpu_->holder.load())) {
    uint64_t busy = 0;
    const uint64_t charged = HolderUsedLocked(*holder, now, &busy);
    const uint64_t reported = gpu_->holder_reported_ns.load();
    ChargeLocked(*holder, charged, start, now, charged, charged - std::min(charged, reported));
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
    // A latency launch takes its lease, then sets the flag only if it reads it clear: one that
    // took it while this looked read the flag still set. Looked at again after the clear, one of
    // the two sees the other (seq_cst), and the flag stays set under a lease.
    // sabotage-point: priority-flag-cleared-under-lease
    if (PriorityActive(now)) gpu_->priority.store(1);
    else changed = true;
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
      gpu_->tail_busy_at_since_ns.store(TenantBusyNs(h, now));
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

void GrantPolicy::ReleaseIfHeldBy(TenantIndex tenant, uint64_t now) {
  std::optional<SchedLock> lock;
  if (!Lock(&lock)) return;
  if (TenantOfGrantField(gpu_->holder.load()) != tenant) return;
  HandOverLocked(now);
}

}  // namespace gpuslice::broker
