// Who holds a GPU, decided from the shared segment, the time and who is alive — nothing else.
// Every participant (a process waiting for the grant, the holder's monitor) calls Advance; the
// decisions are the same whoever makes them, so no daemon is needed. The clock and liveness are
// handed in, so that tests drive the policy in fake time (tests/scheduler/grant_policy_test.cc).
//
// What a process publishes (ProcessGpuState, segment_layout.h) and what the policy reads of it:
//  - inflight > 0 (or kUntrackedWork): it has work on the GPU; the grant moves only once it is 0.
//  - inflight == 0 for less than its grace_ns: it is between two launches of one stream of work
//    (a synchronous launcher), not idle.
//  - waiting_ns fresh: a thread of it waits for the grant.
//  - heartbeat_ns stale (older than the lease): its monitor is stopped (SIGSTOP, a debugger) or
//    starved; its queued kernels finish on the GPU without it, and the others go on.
//  - priority_until_ns in the future: latency-class work that passes the grant.
//
// The policy's parts, a file each: the decision (grant_policy.cc: when a grant ends and moves),
// the survey (grant_survey.cc: who is on the GPU and what its processes do), fair queuing
// (grant_fair_queue.cc: virtual time, who is next, who is owed the GPU) and the charges
// (grant_charges.cc: what each tenant is charged for the device's time). The terms it decides by
// are broker/sched_terms.h, its lock broker/sched_lock.h.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <thread>

#include "broker/checked_index.h"
#include "broker/segment_layout.h"

namespace gpuslice::broker {

class SchedLock;  // broker/sched_lock.h

class GrantPolicy {
 public:
  using Liveness = std::function<bool(ProcessSlot slot)>;
  GrantPolicy(Segment* segment, GpuIndex gpu, Liveness alive);

  // One step of the protocol: counts who waits, clears expired priority, ends the holder's grant
  // when it must end (quantum over and others waiting, a waiter owed the GPU, a latency waiter,
  // a background holder beside a standard waiter, its limit reached), and hands the GPU on when
  // the holder has drained, is idle, is gone or has stopped responding. Takes the GPU's
  // scheduler mutex. Returns true when the grant changed (waiters should be woken).
  bool Advance(uint64_t now);

  // Charges `ns` of a latency tenant's work done outside the grant, like a grant's (scheduler
  // mutex). Of it, up to `wait_allowance_ns` spent while others' work was in flight is the request
  // waiting for the co-runners' queue and is not charged; the rest beside n processes' work is
  // charged 1/(n+1). Returns how much of the allowance that used.
  // `beside_at_least`: the processes the caller saw with work beside its busy period (counted if
  // more than are there now).
  uint64_t ChargePriorityWork(TenantIndex tenant, uint64_t ns, uint64_t now, uint64_t wait_allowance_ns = 0,
                              uint32_t beside_at_least = 0);
  // The tenant's last process leaves: the grant it holds moves on, charged to its last activity.
  void ReleaseIfHeldBy(TenantIndex tenant, uint64_t now);

  // Tenants other than `except` with a live process whose waiting stamp is fresh.
  int CountWaitingTenants(TenantIndex except, uint64_t now) const;
  // True while some live process's latency priority has not expired.
  bool PriorityActive(uint64_t now) const;
  // Processes of other tenants with work on the device: the hardware turns between their
  // contexts and the tenant's. Reads the published counts only (no lock).
  uint32_t ProcessesWithWorkBeside(TenantIndex tenant, uint64_t now) const;

  // For tests and tools: the tenant Advance would grant the GPU to next (nullopt: none eligible).
  std::optional<TenantIndex> PickNext(uint64_t now, uint64_t* retry_after_ns);

  // True while this process last found the GPU's scheduler lock unusable (held past
  // kSchedLockBoundNs, or corrupt): no decision is made, and the process's launches on the GPU
  // go ungated rather than wait for one (broker/scheduler.h). Reported once, in one line.
  bool stuck() const { return stuck_.load(std::memory_order_relaxed); }

 private:
  // --- the decision (grant_policy.cc) ---
  // Takes the scheduler lock into *lock; false (and reported) when it cannot be taken.
  bool Lock(std::optional<SchedLock>* lock);
  bool AdvanceLocked(uint64_t now);
  void HandOverLocked(uint64_t now);
  // Why the holder's grant must end now: a yield (a waiter owed the GPU, or a background holder
  // beside a standard or latency waiter) — before its limit, so that an owed waiter does not wait
  // for a limited holder's drain — its limit, or its quantum while others wait.
  enum class CloseReason { kNone, kLimit, kQuantum, kYield };
  CloseReason ShouldCloseLocked(TenantIndex holder, uint64_t now) const;
  // The holder's activity, as Advance judges it (HolderActivity).
  enum class Activity { kGone, kIdle, kBetweenLaunches, kWaiting, kDraining };
  static bool DrainedFor(CloseReason reason, Activity activity, uint32_t queued, bool limited);

  // --- the survey (grant_survey.cc) ---
  // went_idle_ns: when its last process with no work went idle; queued: its launches in flight,
  // over all its processes (work of unknown extent counting two).
  Activity HolderActivity(TenantIndex tenant, uint64_t now, uint64_t* went_idle_ns = nullptr,
                          uint32_t* queued = nullptr) const;
  // The segment's entries, reached only through checked indices (broker/checked_index.h): the
  // tenants and process slots below their high-water marks (clamped), this GPU's ledger of a
  // tenant, and a raw tenant number — a caller's, or a grant field's (holder, tail_holder: the
  // tenant plus one, 0 for none) — checked against the tenants in use.
  IndexRange<ProcessSlot> Processes() const;
  IndexRange<TenantIndex> Tenants() const;
  LedgerEntry& Ledger(TenantIndex tenant) const;
  std::optional<TenantIndex> Tenant(int raw) const;
  std::optional<TenantIndex> TenantOfGrantField(uint32_t field) const;
  uint32_t TenantHighWater() const;
  // The busy time of the tenant's registered processes on this GPU so far, open periods included.
  uint64_t TenantBusyNs(TenantIndex tenant, uint64_t now) const;
  // Whether one of the tenant's processes has work on this GPU (a fresh heartbeat; no liveness
  // asked, as ProcessesWithWorkBeside).
  bool HasWorkInFlight(TenantIndex tenant, uint64_t now) const;
  // A registered process with work in flight on this GPU and a fresh heartbeat.
  bool HasFreshWork(const ProcessEntry& p, uint64_t now) const;
  bool Fresh(const ProcessEntry& p, uint64_t stamp, uint64_t now) const;
  bool Live(ProcessSlot slot) const;

  // --- fair queuing (grant_fair_queue.cc) ---
  void RefreshWaitingLocked(uint64_t now);
  uint64_t SystemVtime(uint64_t now) const;
  // What a tenant that starts waiting re-enters behind (`counts`: each tenant's waiting processes).
  uint64_t ReentryVtime(TenantIndex entering, const uint32_t* counts, uint64_t now) const;
  static uint64_t RefillNs(const LedgerEntry& l, uint64_t now);
  bool Owed(TenantIndex waiter, TenantIndex holder, uint64_t held) const;

  // --- the charges (grant_charges.cc) ---
  // `ns` to the tenant's virtual time and service, `limit_ns` to its limit's bucket: device time
  // used between `since` and `now`.
  void ChargeLocked(TenantIndex tenant, uint64_t ns, uint64_t since, uint64_t now, uint64_t limit_ns);
  // The same, of which only `unreported_ns` is added to the tenant's service (the rest already was).
  void ChargeLocked(TenantIndex tenant, uint64_t ns, uint64_t since, uint64_t now, uint64_t limit_ns,
                    uint64_t unreported_ns);
  // The holder's device time in its grant so far, less what was charged to others beside it.
  uint64_t HolderUsedLocked(TenantIndex holder, uint64_t now, uint64_t* busy_ns = nullptr) const;
  // Adds to the holder's service what its grant has used since the last report (status, the
  // exporter and share windows read service_ns; its virtual time and bucket move at hand-over).
  void ReportHolderServiceLocked(TenantIndex holder, uint64_t now);
  void CountGrantTimeLocked(uint64_t start, uint64_t used, uint64_t now);
  void SettleTailLocked(uint64_t now, bool force);
  void RollShareWindowLocked(uint64_t now);

  Segment* segment_;
  GpuEntry* gpu_;
  GpuIndex gpu_index_;
  Liveness alive_;
  // Liveness asked during the current decision (0 unknown, 1 alive, -1 dead): used only by the
  // thread deciding (under the scheduler mutex), whose id decider_ holds meanwhile.
  mutable int8_t live_cache_[kMaxProcesses] = {};
  std::atomic<std::thread::id> decider_{};
  std::atomic<bool> stuck_{false};
  uint64_t last_report_ns_ = 0;  // this process's last ReportHolderServiceLocked (under the mutex)
};

}  // namespace gpuslice::broker
