// GrantPolicy: weighted fair queuing in virtual time. Each tenant's virtual time advances by its
// service over its request; the waiting tenant furthest behind is granted the GPU next, a tenant
// that starts waiting re-enters at most two quanta behind, and a waiter far enough behind the
// holder is owed the GPU before the holder's quantum ends (docs/scheduling.md).
#include "broker/grant_policy.h"

#include <algorithm>

#include "broker/sched_terms.h"
#include "common/clock.h"

namespace gpuslice::broker {
namespace {

constexpr uint32_t kRegistered = static_cast<uint32_t>(ProcessState::kRegistered);

}  // namespace

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

}  // namespace gpuslice::broker
