#include "broker/scheduler.h"

#include <sched.h>

#include <algorithm>
#include <cstring>

#include "broker/ledger.h"
#include "broker/tables.h"
#include "common/clock.h"
#include "common/futex.h"
#include "common/robust_mutex.h"

namespace gpuslice::broker {
namespace {

// A new holder counts as busy for this long even before its first launch reaches the gate.
constexpr uint64_t kIdleGraceNs = 100'000;
// The least a grant lasts before a waiter that is owed the GPU may end it (OwedTheGpu).
constexpr uint64_t kMinSliceNs = 1'000'000;
// Waiters look at the grant at least this often (a dead or stuck holder, an expired quantum).
constexpr uint64_t kWaitSliceNs = 500'000;
// The limit's bucket holds at most this much of the limit: short bursts above it are allowed,
// and over any longer window the tenant stays within its limit.
constexpr uint64_t kLimitWindowNs = 100'000'000;
// A tenant capped by its limit becomes eligible again only with this much in its bucket (or a
// full bucket, for limits too small to hold it): fewer, longer grants waste less in hand-overs.
constexpr int64_t kMinLimitedBurstNs = 5'000'000;
// Shares shown by gpuslicectl are measured over windows of this length.
constexpr uint64_t kShareWindowNs = 10'000'000'000ULL;
// Virtual time advances by service × kVtimeScale / request.
constexpr uint64_t kVtimeScale = 100;

uint32_t Weight(const LedgerEntry& ledger) {
  const uint32_t request = ledger.request_pct.load(std::memory_order_relaxed);
  return request ? request : kDefaultRequestPct;
}

uint32_t Limit(const LedgerEntry& ledger) {
  const uint32_t limit = ledger.limit_pct.load(std::memory_order_relaxed);
  return limit ? limit : 100;
}

bool Registered(const ProcessEntry& p) {
  return p.state.load() == static_cast<uint32_t>(ProcessState::kRegistered);
}

// Holds the GPU's scheduler mutex; repairs the waiting total if a holder died mid-update.
class SchedLock {
 public:
  SchedLock(Segment* segment, int gpu) : lock_(&segment->gpus[gpu].sched_mutex.mutex) {
    if (lock_.previous_owner_died()) {
      uint32_t waiting = 0;
      for (int t = 0; t < kMaxTenants; ++t) waiting += segment->ledgers[LedgerIndex(t, gpu)].waiting.load();
      segment->gpus[gpu].waiting.store(waiting);
    }
  }

 private:
  RobustLock lock_;
};

}  // namespace

ComputeGate::ComputeGate(Broker* broker, int ledger)
    : broker_(broker),
      segment_(broker->segment()),
      gpu_(&segment_->gpus[LedgerGpu(ledger)]),
      ledger_(&segment_->ledgers[ledger]),
      busy_(&segment_->processes[broker->slot()].busy[LedgerGpu(ledger)]),
      gpu_index_(LedgerGpu(ledger)),
      tenant_(LedgerTenant(ledger)),
      holder_value_(static_cast<uint32_t>(LedgerTenant(ledger) + 1)) {}

bool ComputeGate::SetShare(uint32_t request_pct, uint32_t limit_pct, std::string* error) {
  SchedLock lock(segment_, gpu_index_);
  const uint32_t request = ledger_->request_pct.load();
  const uint32_t limit = ledger_->limit_pct.load();
  const bool others = OtherProcessHasLedgerOpen(*segment_, tenant_, gpu_index_, broker_->slot());
  if (request != 0 && others && (request != request_pct || limit != limit_pct)) {
    *error = "gpuslice: this tenant's compute request/limit on this GPU is " + std::to_string(request) + "%/" +
             std::to_string(limit) + "%, set by its first process; this process asks for " +
             std::to_string(request_pct) + "%/" + std::to_string(limit_pct) +
             "% (every process of a tenant must have the same GPUSLICE_COMPUTE_REQUEST and GPUSLICE_COMPUTE_LIMIT)";
    return false;
  }
  if (request != request_pct || limit != limit_pct) {
    // A grant the tenant still holds (left by its exited processes) ends here, charged under the
    // settings it was held under: a new limit's bucket must not pay for time held before it.
    if (gpu_->holder.load() == holder_value_) {
      HandOverLocked(MonotonicNanos());
      Wake();
    }
    ledger_->request_pct.store(request_pct);
    ledger_->limit_pct.store(limit_pct);
    ledger_->tokens_ns.store(static_cast<int64_t>(kLimitWindowNs * limit_pct / 100));
    ledger_->tokens_at_ns.store(MonotonicNanos());
  }
  return true;
}

uint64_t ComputeGate::QuantumNs() const {
  const uint64_t quantum = gpu_->quantum_ns.load(std::memory_order_relaxed);
  return quantum ? quantum : kDefaultQuantumNs;
}

void ComputeGate::Wake() {
  gpu_->grant_seq.fetch_add(1);
  FutexWakeAll(&gpu_->grant_seq);
}

void ComputeGate::WaitForChange(uint64_t timeout_ns) {
  const uint32_t seen = gpu_->grant_seq.load();
  FutexWait(&gpu_->grant_seq, seen, timeout_ns);
}

// Idle: every live process of the tenant that has this GPU open has drained (busy == 0), and —
// unless its quantum is being closed — none of them is waiting to launch more.
bool ComputeGate::HolderIsIdle(uint32_t holder_tenant) const {
  const LedgerEntry& ledger = segment_->ledgers[LedgerIndex(static_cast<int>(holder_tenant), gpu_index_)];
  if (gpu_->closing.load() == 0 && ledger.waiting.load() != 0) return false;
  const uint32_t high_water = std::min<uint32_t>(segment_->header.process_high_water.load(), kMaxProcesses);
  for (uint32_t i = 0; i < high_water; ++i) {
    const ProcessEntry& p = segment_->processes[i];
    if (!Registered(p) || p.tenant.load() != static_cast<int32_t>(holder_tenant)) continue;
    if (p.busy[gpu_index_].load() == 0) continue;
    if (broker_->IsProcessAlive(static_cast<int>(i))) return false;  // a dead process has nothing in flight
  }
  return true;
}

bool ComputeGate::TenantHasLiveProcess(uint32_t tenant) const {
  const uint32_t high_water = std::min<uint32_t>(segment_->header.process_high_water.load(), kMaxProcesses);
  for (uint32_t i = 0; i < high_water; ++i) {
    const ProcessEntry& p = segment_->processes[i];
    if (Registered(p) && p.tenant.load() == static_cast<int32_t>(tenant) &&
        (p.open_gpus.load() & (1u << gpu_index_)) && broker_->IsProcessAlive(static_cast<int>(i)))
      return true;
  }
  return false;
}

void ComputeGate::RefillLocked(LedgerEntry& ledger, uint64_t now) const {
  const uint32_t limit = Limit(ledger);
  if (limit >= 100) return;
  const uint64_t last = ledger.tokens_at_ns.load();
  if (now <= last) return;
  const int64_t cap = static_cast<int64_t>(kLimitWindowNs * limit / 100);
  const int64_t gained = static_cast<int64_t>((now - last) * limit / 100);
  ledger.tokens_ns.store(std::min(cap, ledger.tokens_ns.load() + gained));
  ledger.tokens_at_ns.store(now);
}

// The waiting, eligible tenant furthest below its entitlement: the smallest virtual time.
int ComputeGate::PickNextLocked(uint64_t now, uint64_t* wake_after_ns) {
  int best = -1;
  uint64_t best_vtime = UINT64_MAX;
  *wake_after_ns = 0;
  const uint32_t tenants = std::min<uint32_t>(segment_->header.tenant_high_water.load(), kMaxTenants);
  for (uint32_t t = 0; t < tenants; ++t) {
    LedgerEntry& ledger = segment_->ledgers[LedgerIndex(static_cast<int>(t), gpu_index_)];
    if (ledger.waiting.load() == 0) continue;
    if (!TenantHasLiveProcess(t)) {
      // Its waiters died waiting: forget them rather than grant the GPU to nobody.
      gpu_->waiting.fetch_sub(ledger.waiting.exchange(0));
      continue;
    }
    RefillLocked(ledger, now);
    const int64_t burst = std::min(kMinLimitedBurstNs, static_cast<int64_t>(kLimitWindowNs * Limit(ledger) / 100));
    if (Limit(ledger) < 100 && ledger.tokens_ns.load() < burst) {
      const uint64_t until = static_cast<uint64_t>(burst - ledger.tokens_ns.load()) * 100 / Limit(ledger) + 1;
      if (*wake_after_ns == 0 || until < *wake_after_ns) *wake_after_ns = until;
      continue;  // over its limit: not eligible until its bucket refills
    }
    if (ledger.vtime.load() < best_vtime) {
      best_vtime = ledger.vtime.load();
      best = static_cast<int>(t);
    }
  }
  return best;
}

void ComputeGate::HandOverLocked(uint64_t now) {
  const uint32_t holder = gpu_->holder.load();
  if (holder != 0) {
    // The whole grant, drain included, is charged to the tenant that held it.
    LedgerEntry& old = segment_->ledgers[LedgerIndex(static_cast<int>(holder - 1), gpu_index_)];
    const uint64_t held = now > gpu_->grant_start_ns.load() ? now - gpu_->grant_start_ns.load() : 0;
    old.vtime.fetch_add(held * kVtimeScale / Weight(old));
    old.service_ns.fetch_add(held);
    RefillLocked(old, now);
    if (Limit(old) < 100) old.tokens_ns.fetch_sub(static_cast<int64_t>(held));
  }
  // Roll the measurement window that gpuslicectl status reports shares over.
  const uint64_t window_start = gpu_->window_start_ns.load();
  if (window_start == 0 || now - window_start >= kShareWindowNs) {
    const uint32_t tenants = std::min<uint32_t>(segment_->header.tenant_high_water.load(), kMaxTenants);
    for (uint32_t t = 0; t < tenants && window_start != 0; ++t) {
      LedgerEntry& ledger = segment_->ledgers[LedgerIndex(static_cast<int>(t), gpu_index_)];
      const uint64_t served = ledger.service_ns.load() - ledger.window_service_ns.load();
      ledger.last_share_ppm.store(served * 1'000'000 / (now - window_start));
    }
    for (uint32_t t = 0; t < tenants; ++t) {
      LedgerEntry& ledger = segment_->ledgers[LedgerIndex(static_cast<int>(t), gpu_index_)];
      ledger.window_service_ns.store(ledger.service_ns.load());
    }
    gpu_->window_start_ns.store(now);
  }
  uint64_t wake_after = 0;
  const int next = PickNextLocked(now, &wake_after);
  if (next >= 0) {
    const LedgerEntry& chosen = segment_->ledgers[LedgerIndex(next, gpu_index_)];
    gpu_->vclock.store(std::max(gpu_->vclock.load(), chosen.vtime.load()));
    gpu_->grants.fetch_add(1);
  }
  gpu_->grant_start_ns.store(now);
  gpu_->closing.store(0);
  gpu_->holder.store(next >= 0 ? static_cast<uint32_t>(next + 1) : 0);
}

// A waiter far enough below the holder in virtual time need not wait out the whole quantum:
// after a minimum slice the holder's grant ends as soon as the waiter, given one more quantum,
// would still be behind the holder's virtual time including what it has held so far. Between
// tenants that stay busy this never triggers before a full quantum (their virtual times stay
// within a quantum of each other); a tenant that was idle (a latency-sensitive service between
// requests) re-enters behind, and so gets the GPU after one minimum slice plus the drain.
bool ComputeGate::OwedTheGpu(uint32_t holder_tenant, uint64_t held) const {
  if (held < kMinSliceNs) return false;
  const LedgerEntry& holder = segment_->ledgers[LedgerIndex(static_cast<int>(holder_tenant), gpu_index_)];
  const uint64_t holder_vtime = holder.vtime.load() + held * kVtimeScale / Weight(holder);
  const uint64_t quantum_vtime = QuantumNs() * kVtimeScale / Weight(holder);
  return ledger_->vtime.load() + quantum_vtime < holder_vtime;
}

void ComputeGate::StartWaiting() {
  {
    SchedLock lock(segment_, gpu_index_);
    if (ledger_->waiting.fetch_add(1) == 0) {
      // Credit for idle time is bounded: a tenant that slept for an hour re-enters at most two
      // quanta behind the others instead of monopolising the GPU to catch up.
      const uint64_t credit = 2 * QuantumNs() * kVtimeScale / Weight(*ledger_);
      const uint64_t vclock = gpu_->vclock.load();
      if (vclock > credit && ledger_->vtime.load() < vclock - credit) ledger_->vtime.store(vclock - credit);
    }
    gpu_->waiting.fetch_add(1);
  }
  Wake();
}

void ComputeGate::StopWaiting() {
  SchedLock lock(segment_, gpu_index_);
  ledger_->waiting.fetch_sub(1);
  gpu_->waiting.fetch_sub(1);
}

void ComputeGate::Acquire() {
  StartWaiting();
  while (true) {
    const uint32_t seen = gpu_->grant_seq.load();
    if (!gated() || Open()) break;
    const uint64_t now = MonotonicNanos();
    const uint32_t holder = gpu_->holder.load();
    uint64_t sleep_ns = kWaitSliceNs;
    if (holder == 0) {
      SchedLock lock(segment_, gpu_index_);
      if (gpu_->holder.load() == 0) {
        uint64_t wake_after = 0;
        if (PickNextLocked(now, &wake_after) >= 0) {
          HandOverLocked(now);
        } else if (wake_after) {
          sleep_ns = std::min(sleep_ns, wake_after);
        }
      }
    } else if (holder != holder_value_) {
      const uint64_t held = now - gpu_->grant_start_ns.load();
      if (gpu_->closing.load() == 0 && (held >= QuantumNs() || OwedTheGpu(holder - 1, held))) {
        gpu_->closing.store(1);  // the holder's grant is over: it drains, then hands over
        Wake();
      }
      if (held >= kIdleGraceNs && HolderIsIdle(holder - 1)) {
        SchedLock lock(segment_, gpu_index_);
        if (gpu_->holder.load() == holder) HandOverLocked(MonotonicNanos());
      }
    }
    if (gpu_->grant_seq.load() != seen) {
      Wake();
      continue;
    }
    FutexWait(&gpu_->grant_seq, seen, sleep_ns);
  }
  StopWaiting();
}

uint64_t ComputeGate::Monitor(void (*synchronize)(void* context), void* context) {
  const uint32_t holder = gpu_->holder.load();
  const bool mine = holder == holder_value_;
  const uint32_t others_waiting = gpu_->waiting.load() - (mine ? ledger_->waiting.load() : 0);
  const bool must_move = gpu_->closing.load() != 0 || others_waiting > 0 || !mine;
  // 1. Drain: wait for every kernel this process launched, and say so (busy = 0) unless it
  //    launched more meanwhile.
  if (busy_->load() != 0 && must_move) {
    while ((in_flight_.load() & (kLaunchUnit - 1)) != 0) sched_yield();  // launches mid-call
    const uint64_t launched = in_flight_.load() >> 32;
    synchronize(context);
    busy_->store(0);
    const uint64_t after = in_flight_.load();
    if ((after & (kLaunchUnit - 1)) != 0 || (after >> 32) != launched) busy_->store(1);
  }
  if (!mine) return kWaitSliceNs * 10;
  // 2. The holder's side: end an expired or exhausted quantum, and hand over once drained.
  const uint64_t now = MonotonicNanos();
  const uint64_t held = now - gpu_->grant_start_ns.load();
  bool changed = false;
  if (gpu_->closing.load() == 0) {
    const uint32_t limit = Limit(*ledger_);
    const bool quantum_over = others_waiting > 0 && held >= QuantumNs();
    const bool limit_reached =
        limit < 100 && ledger_->tokens_ns.load() + static_cast<int64_t>((now - ledger_->tokens_at_ns.load()) * limit / 100) <=
                           static_cast<int64_t>(held);
    if (quantum_over || limit_reached) {
      gpu_->closing.store(1);
      changed = true;
    }
  }
  if ((gpu_->closing.load() != 0 || others_waiting > 0) && held >= kIdleGraceNs && HolderIsIdle(holder - 1)) {
    SchedLock lock(segment_, gpu_index_);
    if (gpu_->holder.load() == holder) {
      HandOverLocked(MonotonicNanos());
      changed = true;
    }
  }
  if (changed) Wake();
  if (others_waiting > 0 || gpu_->closing.load() != 0) return 200'000;
  if (Limit(*ledger_) < 100) return 1'000'000;
  return kWaitSliceNs * 10;
}

bool SetGpuPolicy(Segment* segment, const uint8_t (&uuid)[16], SharingMode mode, uint64_t quantum_ns,
                  std::string* error) {
  uint64_t words[2];
  std::memcpy(words, uuid, sizeof words);
  const uint32_t gpus = std::min<uint32_t>(segment->header.gpu_high_water.load(), kMaxGpus);
  for (uint32_t g = 0; g < gpus; ++g) {
    GpuEntry& gpu = segment->gpus[g];
    if (gpu.state.load() != static_cast<uint32_t>(EntryState::kInUse) || gpu.uuid[0].load() != words[0] ||
        gpu.uuid[1].load() != words[1])
      continue;
    {
      SchedLock lock(segment, static_cast<int>(g));
      gpu.mode.store(static_cast<uint32_t>(mode));
      gpu.quantum_ns.store(quantum_ns);
      if (mode != SharingMode::kTimeslice) {
        gpu.holder.store(0);
        gpu.closing.store(0);
      }
    }
    gpu.grant_seq.fetch_add(1);
    FutexWakeAll(&gpu.grant_seq);
    return true;
  }
  *error = "gpuslice: no GPU " + FormatUuid(uuid) + " in the broker (it appears once a tenant has used it)";
  return false;
}

}  // namespace gpuslice::broker
