#include "shim/latency_priority.h"

#include <algorithm>

namespace gpuslice::shim {

// A latency tenant's priority outlasts its work by a grace, for a service that launches, waits
// and launches again within a request (contract, point 5). Only a launch that came while its
// priority still held tells such a gap: one after the grace began a new request, and the gaps
// between requests are the service's period, not its turnaround: learnt from those too, a
// service whose requests come a little apart would hold its priority through the gaps between
// them, and take the device from a co-runner. Starts at the least grace, and grows only from gaps
// shorter than the current one.
// That alone ran away: a request that ended late leaves a short gap before the next, learnt as
// one within a request; the grace, four times the gaps learnt, then takes in the ordinary gaps
// between requests, and grows to the longest (a service of a request every 2 ms held its priority
// for good, and its co-runner kept 6% of the device for 84% unmanaged). So each gap between
// requests (one the grace did not cover) ages what was learnt by as much as a learnt gap adds:
// the grace follows the gaps within requests only while they outnumber the short ones between.
void LatencyPriority::NoteGap(uint64_t gap) {
  const uint64_t ewma = gap_ns_.load(std::memory_order_relaxed);
  uint64_t updated;
  if (gap >= grace_ns_.load(std::memory_order_relaxed)) {
    // sabotage-point: grace-learns-gaps-between-requests
    updated = ewma - ewma / 8;
  } else {
    updated = ewma == 0 ? gap : (ewma * 7 + gap) / 8;
  }
  gap_ns_.store(updated, std::memory_order_relaxed);
  grace_ns_.store(std::clamp<uint64_t>(4 * updated + 50'000, broker::kMinGraceNs, broker::kMaxGraceNs),
                  std::memory_order_relaxed);
}

// Priority work is charged as it runs (by the monitor), not only when its busy period ends: a
// latency tenant that keeps its queue full never ends one, and its bucket, never drained, would
// let it pass the grant for ever.
// A busy period's first millisecond beside the holder's work is the request waiting for the
// co-runners' queue, which beside a latency tenant is at most that (QueuedWorkBudget): not charged.
void LatencyPriority::ChargeUpTo(uint64_t now) {
  const uint64_t from = charged_ns_.exchange(now, std::memory_order_relaxed);
  if (now <= from) return;
  const uint64_t allowance = wait_allowance_ns_.load(std::memory_order_relaxed);
  const uint64_t waited =
      gate_->ChargePriorityWork(now - from, now, allowance, beside_at_begin_.exchange(0, std::memory_order_relaxed));
  wait_allowance_ns_.store(allowance - std::min(allowance, waited), std::memory_order_relaxed);
}

// Latency priority lasts while this process has work in flight or is between two launches, and
// its tenant is within its request (the bucket, drained by the work as it runs, holds time).
// Dropped, the rest of the busy period runs under the grant like a standard tenant's.
void LatencyPriority::Update(uint64_t now) {
  if (const uint64_t due = charge_due_ns_.exchange(0, std::memory_order_acquire)) ChargeUpTo(due);
  const uint64_t lease = published_->priority_until_ns.load();
  if (lease == 0) return;
  constexpr uint64_t kChargeEveryNs = 1'000'000;  // each charge takes the scheduler lock
  if (busy_.load(std::memory_order_relaxed) && now - charged_ns_.load(std::memory_order_relaxed) >= kChargeEveryNs)
    ChargeUpTo(now);
  const uint64_t grace = grace_ns_.load(std::memory_order_relaxed);
  const bool active = published_->inflight.load() != 0 || now - published_->idle_since_ns.load() < grace;
  if (active && gate_->PriorityBucketHasTime(now)) {
    gate_->RenewPriority(now);
  } else {
    if (busy_.exchange(false, std::memory_order_relaxed)) ChargeUpTo(now);
    // Only the lease looked at: a launch that took the priority since, for a new request, keeps it.
    gate_->DropPriority(lease);
  }
}

}  // namespace gpuslice::shim
