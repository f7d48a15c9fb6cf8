#include "broker/compute_gate.h"

#include <algorithm>

#include <fmt/format.h>

#include "broker/checked_index.h"
#include "broker/ledger.h"
#include "broker/lock_fault.h"
#include "broker/sched_lock.h"
#include "broker/sched_terms.h"
#include "common/clock.h"
#include "common/futex.h"
#include "common/mutex_lock.h"
#include "common/robust_mutex.h"

namespace gpuslice::broker {
namespace {

constexpr uint32_t kRegistered = static_cast<uint32_t>(ProcessState::kRegistered);
// Waiters look at the grant at least this often (and renew their waiting stamp).
constexpr uint64_t kWaitSliceNs = 500'000;

const char* ClassName(ComputeClass cls) {
  switch (cls) {
    case ComputeClass::kLatency: return "latency";
    case ComputeClass::kBackground: return "background";
    default: return "standard";
  }
}

}  // namespace

ComputeGate::ComputeGate(Broker* broker, LedgerId ledger, ProcessSlot own)
    : broker_(broker),
      segment_(broker->segment()),
      gpu_(&At(*segment_, ledger.gpu())),
      ledger_(&At(*segment_, ledger)),
      mine_(&At(At(*segment_, own).sched, ledger.gpu())),
      own_(own),
      gpu_index_(ledger.gpu()),
      tenant_(ledger.tenant()),
      holder_value_(static_cast<uint32_t>(ledger.tenant().value() + 1)),
      policy_(segment_, ledger.gpu(), [broker](ProcessSlot slot) { return broker->IsProcessAlive(slot); }) {}

Status ComputeGate::SetShare(uint32_t request_pct, uint32_t limit_pct, ComputeClass cls, uint64_t lock_timeout_ns) {
  RobustLock lock(&gpu_->sched_mutex.mutex, lock_timeout_ns);
  if (!lock.locked()) {
    return Status::Unavailable(
        SchedLockFaultLine(segment_, gpu_index_, lock.failure(),
                           "this process's compute share cannot be set, and its launches there are not gated"));
  }
  const uint32_t request = ledger_->request_pct.load();
  const uint32_t limit = ledger_->limit_pct.load();
  const auto current = static_cast<ComputeClass>(ledger_->compute_class.load());
  const bool others = TenantHasOtherLiveProcess();
  if (request != 0 && others && (request != request_pct || limit != limit_pct || current != cls)) {
    return Status::InvalidArgument(fmt::format(
        "gpuslice: this tenant's compute request/limit/class on this GPU is {}%/{}%/{}, set by its first process; "
        "this process asks for {}%/{}%/{} (every process of a tenant must have the same GPUSLICE_COMPUTE_REQUEST, "
        "GPUSLICE_COMPUTE_LIMIT and GPUSLICE_COMPUTE_CLASS)",
        request, limit, ClassName(current), request_pct, limit_pct, ClassName(cls)));
  }
  const uint64_t now = MonotonicNanos();
  if (request != request_pct || limit != limit_pct || current != cls) {
    ledger_->request_pct.store(request_pct);
    ledger_->limit_pct.store(limit_pct);
    ledger_->compute_class.store(static_cast<uint32_t>(cls));
    ledger_->tokens_ns.store(static_cast<int64_t>(kBucketWindowNs * limit_pct / 100));
    ledger_->tokens_at_ns.store(now);
    ledger_->priority_tokens_ns.store(static_cast<int64_t>(kBucketWindowNs * request_pct / 100));
    ledger_->priority_tokens_at_ns.store(now);
  }
  class_ = cls;
  limit_pct_ = limit_pct;
  mine_->heartbeat_ns.store(now);
  return Status::Ok();
}

bool ComputeGate::TenantHasOtherLiveProcess() const {
  for (ProcessSlot slot : UsedProcessSlots(*segment_)) {
    const ProcessEntry& p = At(*segment_, slot);
    if (slot == own_ || p.state.load() != kRegistered || p.tenant.load() != tenant_.value()) continue;
    if (IsGpuOpen(p, gpu_index_) && broker_->IsProcessAlive(slot)) return true;
  }
  return false;
}

// Liveness is a system call: asked only of another tenant's process, and only until one is found
// alive (and, for the latency class, of its processes).
ComputeGate::Neighbours ComputeGate::Survey(uint64_t now) const {
  Neighbours n;
  for (ProcessSlot slot : UsedProcessSlots(*segment_)) {
    const ProcessEntry& p = At(*segment_, slot);
    if (p.state.load() != kRegistered || !IsGpuOpen(p, gpu_index_)) continue;
    const std::optional<TenantIndex> index = TenantOf(p);
    if (index && *index == tenant_) {
      ++n.own_processes;
      continue;
    }
    const LedgerEntry* ledger = index ? &At(*segment_, LedgerId::Of(*index, gpu_index_)) : nullptr;
    const bool latency =
        ledger && ClassOf(*ledger) == ComputeClass::kLatency &&
        BucketNow(ledger->priority_tokens_ns.load(), ledger->priority_tokens_at_ns.load(), WeightOf(*ledger), now) > 0;
    if ((n.others && (n.latency || !latency)) || !broker_->IsProcessAlive(slot)) continue;
    n.others = true;
    n.latency = n.latency || latency;
  }
  return n;
}

bool ComputeGate::OthersWaiting(uint64_t now) const { return policy_.CountWaitingTenants(tenant_, now) > 0; }

int64_t ComputeGate::PriorityBucketNs(uint64_t now) const {
  const LedgerEntry& l = *ledger_;
  return BucketNow(l.priority_tokens_ns.load(), l.priority_tokens_at_ns.load(), WeightOf(l), now);
}

bool ComputeGate::TakePriority(uint64_t now) {
  // sabotage-point: latency-class-waits
  if (class_ != ComputeClass::kLatency) return false;
  // Within its request (the priority bucket is not empty): the launch passes the grant.
  // sabotage-point: latency-bucket-ignored
  if (!PriorityBucketHasTime(now)) return false;
  mine_->priority_until_ns.store(now + LeaseOf(*gpu_));
  if (gpu_->priority.load() == 0) {
    gpu_->priority.store(1);
    Wake();  // holders' monitors look again: their queues are cut, their grants end
  }
  return true;
}

void ComputeGate::RenewPriority(uint64_t now) {
  if (mine_->priority_until_ns.load() != 0) mine_->priority_until_ns.store(now + LeaseOf(*gpu_));
}

void ComputeGate::DropPriority(uint64_t lease) {
  // sabotage-point: priority-drop-races-take
  if (lease == 0 || !mine_->priority_until_ns.compare_exchange_strong(lease, 0)) return;
  Advance(MonotonicNanos());  // clears the GPU's flag if last
}

uint64_t ComputeGate::ChargePriorityWork(uint64_t ns, uint64_t now, uint64_t wait_allowance_ns,
                                         uint32_t beside_at_least) {
  return policy_.ChargePriorityWork(tenant_, ns, now, wait_allowance_ns, beside_at_least);
}

void ComputeGate::Wake() { WakeGrantWaiters(gpu_); }

void ComputeGate::NoteFirstGrantedLaunch() {
  uint64_t none = 0;
  const uint64_t start = gpu_->grant_start_ns.load();
  const uint64_t now = MonotonicNanos();
  // Only for the grant that let it in: after a hand-over the next decision resets the field.
  if (HeldByUs() && gpu_->grant_start_ns.load() == start)
    gpu_->first_work_ns.compare_exchange_strong(none, std::max(now, start));
}

void ComputeGate::WaitForChange(uint64_t timeout_ns) {
  const uint32_t seen = gpu_->grant_seq.load();
  FutexWait(&gpu_->grant_seq, seen, timeout_ns);
}

void ComputeGate::Advance(uint64_t now) {
  if (policy_.Advance(now)) Wake();
}

void ComputeGate::CountWait(uint64_t waited_ns) {
  ledger_->waits.fetch_add(1, std::memory_order_relaxed);
  ledger_->wait_ns.fetch_add(waited_ns, std::memory_order_relaxed);
  size_t bucket = 0;
  while (bucket < std::size(kWaitBucketsNs) && waited_ns > kWaitBucketsNs[bucket]) ++bucket;
  ledger_->wait_buckets[bucket].fetch_add(1, std::memory_order_relaxed);
}

void ComputeGate::Acquire() {
  const uint64_t start = MonotonicNanos();
  waiting_threads_.fetch_add(1);
  bool first = true;
  while (gated() && !GrantOpen()) {
    const uint32_t seen = gpu_->grant_seq.load();
    const uint64_t now = MonotonicNanos();
    {
      MutexLock stamping(&stamp_mutex_);
      if (left_.load()) {  // the process exits: the launch goes on ungated, unrecorded
        waiting_threads_.fetch_sub(1);
        return;
      }
      mine_->waiting_ns.store(now);  // renewed every slice: a stopped or dead waiter goes stale
      mine_->heartbeat_ns.store(now);
    }
    // A decision made by someone else in the last quarter slice stands: a hundred waiters must
    // not take the scheduler mutex (and scan every process) two thousand times a second each.
    const uint64_t last = gpu_->last_decision_ns.load();
    if (first || last > now || now - last >= kWaitSliceNs / 4) Advance(now);
    first = false;
    if (!gated() || GrantOpen()) break;
    FutexWait(&gpu_->grant_seq, seen, kWaitSliceNs);
  }
  if (waiting_threads_.fetch_sub(1) == 1) mine_->waiting_ns.store(0);
  CountWait(MonotonicNanos() - start);
}

void ComputeGate::Leave() {
  {
    MutexLock stamping(&stamp_mutex_);
    left_.store(true);
  }
  const uint64_t now = MonotonicNanos();
  mine_->waiting_ns.store(0);
  mine_->priority_until_ns.store(0);
  mine_->inflight.store(0);
  mine_->idle_since_ns.store(now);
  if (!TenantHasOtherLiveProcess()) policy_.ReleaseIfHeldBy(tenant_, now);
  policy_.Advance(now);
  Wake();
}

}  // namespace gpuslice::broker
