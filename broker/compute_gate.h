// Compute time-slicing, one process's handle on one GPU: the grant is held by one tenant at a
// time and moves by weighted fair queuing (broker/grant_policy.h; docs/scheduling.md).
//
// The process publishes what it does on the GPU in its ProcessGpuState (in-flight launches,
// waiting, heartbeat, latency priority) and reads the grant. The launch hooks and the process's
// monitor thread (shim/launch_tracker.h, shim/compute_monitor.cc) own the process-local half:
// which launches are in flight and when they complete. Nothing here calls the driver.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "broker/broker.h"
#include "broker/grant_policy.h"
#include "broker/sched_lock.h"
#include "broker/sched_terms.h"
#include "broker/segment_layout.h"
#include "common/mutex.h"

namespace gpuslice::broker {

class ComputeGate {
 public:
  // For this process (registered in slot `own`) and its tenant on the GPU of `ledger` (opened
  // with Broker::OpenLedger).
  ComputeGate(Broker* broker, LedgerId ledger, ProcessSlot own);
  ComputeGate(const ComputeGate&) = delete;
  ComputeGate& operator=(const ComputeGate&) = delete;

  // Sets (first process of the tenant on this GPU) or checks the tenant's request, limit and
  // class; every process of a tenant must agree.
  // The GPU's scheduler lock is waited for at most `lock_timeout_ns` (SchedLockTimeoutNs() by
  // default; 0 only tries it).
  Status SetShare(uint32_t request_pct, uint32_t limit_pct, ComputeClass cls,
                  uint64_t lock_timeout_ns = SchedLockTimeoutNs());

  SharingMode mode() const { return static_cast<SharingMode>(gpu_->mode.load(std::memory_order_relaxed)); }
  // False once the process has left the GPU (it exits): its slot is no longer its own.
  // Nor while the GPU's scheduler lock is stuck (GrantPolicy::stuck): no grant can move then, and
  // a soft slice degrades to the hardware's sharing rather than freeze every tenant; the process's
  // monitor keeps trying the lock and gating resumes once it is free.
  bool gated() const {
    return mode() == SharingMode::kTimeslice && !left_.load(std::memory_order_relaxed) && !policy_.stuck();
  }
  ComputeClass compute_class() const { return class_; }
  // Limited and non-standard tenants track every launch's completion, also when alone.
  bool always_tracked() const { return class_ != ComputeClass::kStandard || limited(); }
  bool limited() const { return limit_pct_ < 100; }

  // The fast path's test: this tenant holds the grant, it is not closing, and no latency work
  // has priority (latency tenants pass their own priority).
  bool GrantOpen() const {
    return gpu_->holder.load() == holder_value_ && gpu_->closing.load() == 0 &&
           (class_ == ComputeClass::kLatency || gpu_->priority.load() == 0);
  }
  // This process's published state on the GPU.
  ProcessGpuState& published() { return *mine_; }
  // When the queued work of the GPU's processes beside a latency tenant is predicted to have run
  // (GpuEntry::queue_drain_at_ns): shared by every such process, moved on by each launch.
  std::atomic<uint64_t>& queue_drain_at() { return gpu_->queue_drain_at_ns; }
  // A launch got in under the grant: the grant's first is when the device had the holder's work
  // again after the hand-over (GpuEntry::first_work_ns). One load of a line GrantOpen read.
  void NoteGrantedLaunch() {
    if (gpu_->first_work_ns.load(std::memory_order_relaxed) == 0) NoteFirstGrantedLaunch();
  }

  // Latency class: true when this launch may pass the grant (the tenant is within its request),
  // and then the priority lease is taken. RenewPriority extends it while work is in flight.
  bool TakePriority(uint64_t now);
  // The priority bucket still holds time: the tenant is within its request.
  bool PriorityBucketHasTime(uint64_t now) const { return PriorityBucketNs(now) > 0; }
  // How much time it holds (negative: a debt).
  int64_t PriorityBucketNs(uint64_t now) const;
  void RenewPriority(uint64_t now);
  // Ends the priority lease `lease` (priority_until_ns as the caller read it); a lease taken
  // since, by a launch of a new request, stands.
  void DropPriority(uint64_t lease);
  // Latency work done outside the grant is charged as if granted.
  // The wait allowance: see GrantPolicy::ChargePriorityWork.
  uint64_t ChargePriorityWork(uint64_t ns, uint64_t now, uint64_t wait_allowance_ns, uint32_t beside_at_least = 0);
  // Other tenants' processes with work in flight on the GPU (their published counts; no lock).
  uint32_t ProcessesWithWorkBeside(uint64_t now) const { return policy_.ProcessesWithWorkBeside(tenant_, now); }

  // The slow path: blocks until GrantOpen() or the GPU is no longer gated. Interruptible: the
  // thread sleeps in futex waits of at most half a millisecond; signals are delivered.
  void Acquire();

  // One step of the grant protocol (broker/grant_policy.h); wakes waiters when it changed.
  void Advance(uint64_t now);
  // Who else is on this GPU, as the monitor's budget needs it.
  struct Neighbours {
    bool others = false;         // another tenant has a live process with this GPU open
    bool latency = false;        // one of them is of the latency class and within its request
    uint32_t own_processes = 0;  // processes of this tenant with this GPU open, this one included
  };
  Neighbours Survey(uint64_t now) const;
  // Another tenant has a process waiting for the grant.
  bool OthersWaiting(uint64_t now) const;
  bool HeldByUs() const { return gpu_->holder.load() == holder_value_; }
  bool Closing() const { return gpu_->closing.load() != 0; }
  uint64_t BudgetNs() const { return BudgetOf(*gpu_); }
  uint64_t LeaseNs() const { return LeaseOf(*gpu_); }

  // This process leaves the GPU (exit): its state is cleared, and a grant its tenant holds moves
  // on unless another live process of the tenant still has the GPU open. A thread still waiting
  // for the grant (exit() from main while a worker waits) stops publishing that it waits, and its
  // launch goes on ungated: the process is gone from the scheduler's view.
  void Leave();

  // Waits (futex) until the GPU's grant state changes or timeout_ns pass.
  void WaitForChange(uint64_t timeout_ns);
  void Wake();

 private:
  bool TenantHasOtherLiveProcess() const;
  void CountWait(uint64_t waited_ns);
  void NoteFirstGrantedLaunch();

  Broker* broker_;
  Segment* segment_;
  GpuEntry* gpu_;
  LedgerEntry* ledger_;
  ProcessGpuState* mine_;
  ProcessSlot own_;  // this process's
  GpuIndex gpu_index_;
  TenantIndex tenant_;
  uint32_t holder_value_;  // tenant + 1
  ComputeClass class_ = ComputeClass::kStandard;
  uint32_t limit_pct_ = 100;
  GrantPolicy policy_;
  std::atomic<int> waiting_threads_{0};
  // Waiting threads stamp the segment under stamp_mutex_, and not once left_ is set: after Leave
  // no stamp of this process is left fresh for a decision to count it by. (It guards no member:
  // left_ is read without it, and the stamps are the segment's.)
  Mutex stamp_mutex_;
  std::atomic<bool> left_{false};
};

}  // namespace gpuslice::broker
