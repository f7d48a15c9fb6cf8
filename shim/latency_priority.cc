#include "shim/latency_priority.h"

#include <algorithm>

namespace gpuslice::shim {

// A latency tenant's priority outlasts its work by a grace, for a service that launches, waits
// and launches again within a request (contract, point 5): four times the moving average of the
// gaps within its requests, plus a margin. Which gaps are within a request:
// - those the grace covered (a launch while the priority still held);
// - those shorter than kGapWithinRequestBelowNs, a host's turnaround: with nothing learnt the
//   grace is the margin alone, and a request's first gap comes after it;
// - those whose grace (four times the gap, plus the margin) is shorter than a quarter of the
//   service's gaps between requests: told apart from those by the same margin of four the grace
//   keeps over the gaps it bridges. A service whose requests come close, and often late (a gap
//   of a few hundred microseconds before the next where its period leaves a millisecond and
//   more), does not learn those gaps as gaps within a request.
// Any other gap began a new request. The gaps between requests are the service's period, not its
// turnaround, and learnt they would hold the priority through them, and the co-runners off the
// device. So the grace never reaches half the gaps between requests, and each gap between
// requests ages what was learnt by as much as a learnt gap adds: a request that ends late leaves
// a short gap before the next, learnt as one within, and without the ageing the grace grew with
// each such gap to take in the ordinary gaps between requests (a service of a request every 2 ms
// held its priority for good, and its co-runner kept 6% of the device for 84% unmanaged).
// The gaps between requests are counted as the longest gap of late (of those a host's turnaround
// or longer), forgotten by a 32nd at each gap: by the gaps alone a chain's requests are not told
// apart from a stream of kernels, and a count of the gaps taken for between requests alone would
// never see a service's requests come closer once the grace covered its gaps; averaged, the gaps
// of a chain would pull it down to themselves.
void LatencyPriority::NoteGap(uint64_t gap) {
  const uint64_t ewma = gap_ns_.load(std::memory_order_relaxed);
  uint64_t between = between_ns_.load(std::memory_order_relaxed);
  // sabotage-point: latency-grace-learns-only-covered-gaps
  const bool within = gap < std::max(grace_ns_.load(std::memory_order_relaxed), kGapWithinRequestBelowNs) ||
                      // sabotage-point: latency-grace-learns-no-long-gap
                      4 * (4 * gap + kLatencyGraceMarginNs) < between;
  if (gap >= kGapWithinRequestBelowNs) {
    // A long idle counts as 32 ms (four times four times the longest grace): forgotten at each
    // gap, a minute's idle would take a while to leave the count.
    between = std::max(std::min(gap, 16 * broker::kMaxGraceNs), between - between / 32);
    between_ns_.store(between, std::memory_order_relaxed);
  }
  uint64_t updated;
  if (!within) {
    // sabotage-point: grace-learns-gaps-between-requests
    updated = ewma - ewma / 8;
  } else {
    updated = ewma == 0 ? gap : (ewma * 7 + gap) / 8;
  }
  gap_ns_.store(updated, std::memory_order_relaxed);
  // sabotage-point: latency-grace-floor-of-standard-class
  uint64_t grace = std::min<uint64_t>(4 * updated + kLatencyGraceMarginNs, broker::kMaxGraceNs);
  // sabotage-point: latency-grace-bridges-requests
  if (between != 0) grace = std::min(grace, std::max(between / 2, kLatencyGraceMarginNs));
  grace_ns_.store(grace, std::memory_order_relaxed);
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

uint64_t LatencyPriority::UntilGraceEndsNs(uint64_t now) const {
  constexpr uint64_t kNone = UINT64_MAX;
  if (published_->priority_until_ns.load() == 0 || published_->inflight.load() != 0) return kNone;
  const uint64_t end = published_->idle_since_ns.load() + grace_ns_.load(std::memory_order_relaxed);
  return end > now ? end - now : 0;
}

}  // namespace gpuslice::shim
