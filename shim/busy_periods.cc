#include "shim/busy_periods.h"

#include <algorithm>

#include "broker/sched_terms.h"

namespace gpuslice::shim {

// How long since the last launch completed tells this process's launch gaps, from which its idle
// grace is set (a synchronous launcher must not look idle between kernels). A launch that first
// waited for the grant or the budget says nothing about the program's own gaps.
std::optional<uint64_t> BusyPeriods::GapBefore(uint64_t now, bool waited) const {
  const uint64_t idle_since = published_->idle_since_ns.load(std::memory_order_relaxed);
  if (waited || idle_since == 0 || now <= idle_since) return std::nullopt;
  return now - idle_since;
}

void BusyPeriods::LearnGap(uint64_t gap) {
  if (gap >= broker::kMaxGraceNs) return;
  const uint64_t ewma = gap_ns_.load(std::memory_order_relaxed);
  const uint64_t updated = ewma == 0 ? gap : (ewma * 7 + gap) / 8;
  gap_ns_.store(updated, std::memory_order_relaxed);
  published_->grace_ns.store(
      static_cast<uint32_t>(std::clamp<uint64_t>(4 * updated + 50'000, broker::kMinGraceNs, broker::kMaxGraceNs)));
}

// The busy period since busy_since_ns is added to the process's busy time (before idle_since_ns
// moves, which a decision reads as the period's end).
void BusyPeriods::End(uint64_t end) {
  const uint64_t since = published_->busy_since_ns.load();
  if (since != 0 && end > since) published_->busy_total_ns.fetch_add(end - since);
  published_->idle_since_ns.store(std::max(end, since));
}

}  // namespace gpuslice::shim
