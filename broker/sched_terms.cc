#include "broker/sched_terms.h"

#include <algorithm>

#include "common/clock.h"

namespace gpuslice::broker {
namespace {

// What a bucket filling at pct % gains from `from` to `now`. The bound on the elapsed time
// (11 days) only keeps the product in range.
int64_t GainedNs(uint64_t from, uint64_t now, uint32_t pct) {
  constexpr uint64_t kMaxElapsedNs = 1'000'000'000'000'000ULL;
  return static_cast<int64_t>(std::min(Elapsed(from, now), kMaxElapsedNs) * pct / 100);
}

}  // namespace

uint64_t QuantumOf(const GpuEntry& gpu) {
  const uint64_t quantum = gpu.quantum_ns.load(std::memory_order_relaxed);
  return quantum ? quantum : kDefaultQuantumNs;
}

uint64_t BudgetOf(const GpuEntry& gpu) {
  const uint64_t budget = gpu.budget_ns.load(std::memory_order_relaxed);
  return budget ? budget : kDefaultBudgetNs;
}

uint64_t LeaseOf(const GpuEntry& gpu) { return std::max(2 * QuantumOf(gpu), kMinLeaseNs); }

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
  // good (its bucket is not recharged, so tokens_at does not move, while it waits).
  return std::min(tokens + GainedNs(tokens_at, now, pct), cap);
}

int64_t BucketAfterUse(int64_t tokens, uint64_t tokens_at, uint32_t pct, uint64_t since, uint64_t now,
                       uint64_t used_ns) {
  // A use that began before the last charge gains only from then: the bucket already holds the
  // gain up to tokens_at.
  const uint64_t from = std::clamp(since, tokens_at, std::max(tokens_at, now));
  const int64_t cap = static_cast<int64_t>(kBucketWindowNs * pct / 100);
  const int64_t at_start = BucketNow(tokens, tokens_at, pct, from);
  const int64_t gained = GainedNs(from, now, pct);
  const int64_t used = static_cast<int64_t>(std::min<uint64_t>(used_ns, INT64_MAX / 2));
  // sabotage-point: bucket-capped-before-use
  return std::min(at_start + gained - used, cap);
}

}  // namespace gpuslice::broker
