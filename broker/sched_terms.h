// A GPU's time-slicing terms as the segment holds them, read with their defaults and bounds: the
// quantum, the budget of queued work, the lease that waiting stamps, heartbeats and priority live
// for, a tenant's weight (its request), limit and class, and the token buckets that hold a limit
// and the latency class's priority to their percentages (docs/scheduling.md).
#pragma once

#include <cstdint>

#include "broker/segment_layout.h"

namespace gpuslice::broker {

inline constexpr uint64_t kDefaultQuantumNs = 10'000'000;
inline constexpr uint64_t kDefaultBudgetNs = 2'000'000;
inline constexpr uint32_t kDefaultRequestPct = 10;
// The least a lease (heartbeat, waiting stamp, priority) lasts, however short the quantum.
inline constexpr uint64_t kMinLeaseNs = 20'000'000;
// Bounds of a process's idle grace (a few times its own launch gaps).
inline constexpr uint64_t kMinGraceNs = 200'000;
inline constexpr uint64_t kMaxGraceNs = 2'000'000;
// The least a grant lasts before a waiter that is owed the GPU may end it.
inline constexpr uint64_t kMinSliceNs = 1'000'000;
// The limit's and the latency priority's buckets hold at most this much of their percentage.
inline constexpr uint64_t kBucketWindowNs = 100'000'000;
// A tenant capped by its limit becomes eligible again only with this much in its bucket.
inline constexpr int64_t kMinLimitedBurstNs = 5'000'000;
// Shares shown by gpuslicectl are measured over windows of this length.
inline constexpr uint64_t kShareWindowNs = 10'000'000'000ULL;
// A grant's device time reaches its holder's service counter at least this often while it lasts
// (a grant lasts as long as nobody waits, seconds beside a latency service that passes the grant;
// counted only at its hand-over, a scrape would see the tenants' shares sum past the device).
inline constexpr uint64_t kServiceReportNs = 100'000'000;
// Virtual time advances by service × kVtimeScale / request.
inline constexpr uint64_t kVtimeScale = 100;

uint64_t QuantumOf(const GpuEntry& gpu);
uint64_t BudgetOf(const GpuEntry& gpu);
uint64_t LeaseOf(const GpuEntry& gpu);  // max(2 quanta, kMinLeaseNs)
uint32_t WeightOf(const LedgerEntry& ledger);
uint32_t LimitOf(const LedgerEntry& ledger);
ComputeClass ClassOf(const LedgerEntry& ledger);

// A bucket that fills at pct % of real time up to pct % of kBucketWindowNs. Charges may take it
// below zero by any amount (the drain of long kernels); that debt is repaid in full at pct %.
int64_t BucketNow(int64_t tokens, uint64_t tokens_at, uint32_t pct, uint64_t now);
// The bucket at `now` after `used_ns` of device time between `since` and `now`: full to its cap at
// most as the use began, it gains while the time is used and is capped only after the use is
// taken off (BucketNow(now) less the use would drop what it gained during a use longer than the
// cap, and charge a long grant far more than it ran over its limit).
int64_t BucketAfterUse(int64_t tokens, uint64_t tokens_at, uint32_t pct, uint64_t since, uint64_t now,
                       uint64_t used_ns);

}  // namespace gpuslice::broker
