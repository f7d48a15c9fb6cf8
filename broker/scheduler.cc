#include "broker/scheduler.h"

#include <algorithm>
#include <cstring>
#include <optional>

#include <fmt/format.h>

#include "broker/checked_index.h"
#include "broker/lock_fault.h"
#include "broker/sched_lock.h"
#include "broker/sched_terms.h"
#include "broker/uuid.h"
#include "common/clock.h"
#include "common/robust_mutex.h"

namespace gpuslice::broker {
namespace {

std::optional<GpuIndex> FindGpu(const Segment& segment, const uint8_t (&uuid)[16]) {
  uint64_t words[2];
  std::memcpy(words, uuid, sizeof words);
  for (GpuIndex g : UsedGpus(segment)) {
    const GpuEntry& gpu = At(segment, g);
    if (gpu.state.load() == static_cast<uint32_t>(EntryState::kInUse) && gpu.uuid[0].load() == words[0] &&
        gpu.uuid[1].load() == words[1])
      return g;
  }
  return std::nullopt;
}

}  // namespace

void PresetShare(Broker* broker, LedgerId ledger, uint32_t request_pct, uint32_t limit_pct, ComputeClass cls,
                 uint64_t lock_timeout_ns) {
  Segment& segment = *broker->segment();
  RobustLock lock(&At(segment, ledger.gpu()).sched_mutex.mutex, lock_timeout_ns);
  if (!lock.locked()) return;  // SetShare tries again, and reports, at the first launch
  LedgerEntry& entry = At(segment, ledger);
  if (entry.request_pct.load() != 0) return;
  const uint64_t now = MonotonicNanos();
  entry.request_pct.store(request_pct);
  entry.limit_pct.store(limit_pct);
  entry.compute_class.store(static_cast<uint32_t>(cls));
  entry.tokens_ns.store(static_cast<int64_t>(kBucketWindowNs * limit_pct / 100));
  entry.tokens_at_ns.store(now);
  entry.priority_tokens_ns.store(static_cast<int64_t>(kBucketWindowNs * request_pct / 100));
  entry.priority_tokens_at_ns.store(now);
}

static Status NoSuchGpu(const uint8_t (&uuid)[16]) {
  return Status::NotFound(
      fmt::format("gpuslice: no GPU {} in the broker (it appears once a tenant has used it)", FormatUuid(uuid)));
}

Status SetGpuPolicy(Segment* segment, const uint8_t (&uuid)[16], SharingMode mode, uint64_t quantum_ns) {
  const std::optional<GpuIndex> index = FindGpu(*segment, uuid);
  if (!index) return NoSuchGpu(uuid);
  GpuEntry* gpu = &At(*segment, *index);
  {
    RobustLock lock(&gpu->sched_mutex.mutex, SchedLockTimeoutNs());
    if (!lock.locked())
      return Status::Unavailable(SchedLockFaultLine(segment, *index, lock.failure(), "the policy is not changed"));
    gpu->mode.store(static_cast<uint32_t>(mode));
    gpu->quantum_ns.store(quantum_ns);
    if (mode != SharingMode::kTimeslice) {
      gpu->holder.store(0);
      gpu->closing.store(0);
    }
  }
  WakeGrantWaiters(gpu);
  return Status::Ok();
}

Status SetGpuBudget(Segment* segment, const uint8_t (&uuid)[16], uint64_t budget_ns) {
  const std::optional<GpuIndex> index = FindGpu(*segment, uuid);
  if (!index) return NoSuchGpu(uuid);
  GpuEntry* gpu = &At(*segment, *index);
  gpu->budget_ns.store(budget_ns);
  WakeGrantWaiters(gpu);
  return Status::Ok();
}

}  // namespace gpuslice::broker
