// The process-local half of the compute gate on one GPU: which of this process's launches are
// still in flight, tracked by completion rather than by synchronising.
//
// While the tenant shares the GPU (another tenant has it open), or is limited or of a non-standard
// class, every gated launch is followed by an event (from a per-context pool) and counted in the
// process's published in-flight count; the monitor and blocked launchers poll the oldest events
// (cuEventQuery) and count completions down. While others share the GPU the process keeps at
// most a budget of work queued (the GPU's budget over the measured kernel length, at least one
// kernel), so a hand-over waits for what is running, not for a backlog.
//
// Alone on the GPU, launches are not tracked (no event, no shared store but a flag that says "work
// of unknown extent"): the fast path stays a few atomic operations. When another tenant arrives,
// the monitor switches tracking on and confirms the untracked work finished, once, by
// synchronising the process's contexts.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <unordered_map>
#include <vector>

#include "broker/scheduler.h"
#include "common/mutex.h"
#include "common/thread_annotations.h"
#include "shim/context_sync.h"
#include "shim/driver_api.h"
#include "shim/untracked_slots.h"

namespace gpuslice::shim {

class LaunchTracker {
 public:
  LaunchTracker(ContextSync* contexts, broker::ComputeGate* gate);
  LaunchTracker(const LaunchTracker&) = delete;
  LaunchTracker& operator=(const LaunchTracker&) = delete;

  broker::ComputeGate* gate() const { return gate_; }

  // How a launch got in: under the tenant's grant (tracked or not) or by latency priority; an
  // untracked one, with the flag it raised (lowered by Exit).
  struct Entry {
    enum class Kind : uint8_t { kUntracked, kTracked, kPriority } kind = Kind::kTracked;
    UntrackedSlots::Ticket ticket;
  };

  // The fast path. True: the caller may launch now and must then call Exit. False: call Wait,
  // then try again (with `waited`). Inline up to the untracked launch, the whole of it while the
  // tenant is alone on the GPU.
  bool TryEnter(Entry* entry, bool waited = false) {
    if (!tracking_.load(std::memory_order_relaxed)) {
      const UntrackedSlots::Ticket ticket = untracked_.Enter();  // pairs with the switch to tracking
      if (!tracking_.load(std::memory_order_relaxed)) return EnterUntracked(entry, ticket);
      UntrackedSlots::Exit(ticket);
    }
    return EnterTracked(entry, waited);
  }
  void Exit(const Entry& entry, CUresult launched, CUstream stream, bool per_thread) {
    if (entry.kind == Entry::Kind::kUntracked) {
      UntrackedSlots::Exit(entry.ticket);
      return;
    }
    ExitTracked(launched, stream, per_thread);
  }
  // The slow path: blocks (interruptibly) until the grant is this tenant's again or enough of its
  // queued work has completed.
  void Wait();

  // One step of the process's monitor; returns how long it may sleep.
  uint64_t MonitorStep(uint64_t now);

  // The application destroyed `context` (nullptr: every context of the device): its queued work
  // and events are gone. Call with synchronisation paused (ContextSync::pause_mutex).
  void ForgetContext(CUcontext context);

  // For the benchmarks and tests: the current budget in kernels and the kernel length estimate.
  uint32_t budget_kernels() const { return budget_kernels_.load(std::memory_order_relaxed); }
  uint64_t kernel_estimate_ns() const { return kernel_ns_.load(std::memory_order_relaxed); }

 private:
  struct Pending {
    CUevent event;
    CUcontext context;
    uint64_t launched_ns;
  };

  bool EnterUntracked(Entry* entry, const UntrackedSlots::Ticket& ticket) {
    if ((published_->inflight.load(std::memory_order_relaxed) & broker::kUntrackedWork) == 0) FlagUntrackedWork();
    if (gate_->GrantOpen()) {
      *entry = Entry{Entry::Kind::kUntracked, ticket};
      return true;
    }
    UntrackedSlots::Exit(ticket);
    return false;
  }
  void FlagUntrackedWork();
  bool EnterTracked(Entry* entry, bool waited);
  void ExitTracked(CUresult launched, CUstream stream, bool per_thread);
  // Takes completed launches off the queue; returns how many are still in flight.
  uint32_t Poll(uint64_t now);
  void CountDown(uint32_t completed, uint64_t now);
  void EndBusyPeriod(uint64_t now);
  void ChargePriorityUpTo(uint64_t now);
  void NoteLaunch(uint32_t before, uint64_t now, bool waited, bool priority);
  bool RecordCompletionEvent(CUstream stream, bool per_thread, uint64_t now);
  void ConfirmUntrackedWorkDone(uint64_t now);
  void WaitForOldest();
  void UpdateBudget();

  ContextSync* contexts_;
  broker::ComputeGate* gate_;
  broker::ProcessGpuState* published_;
  std::atomic<bool> tracking_{false};
  std::atomic<bool> bounded_{false};  // others share the GPU: keep at most the budget queued
  // Launches mid-call on the untracked path, flagged per thread: each of the process's first
  // kOwnSlots launching threads has a flag of its own, on a cache line of its own, which only it
  // writes — with plain stores, the monitor's switch to tracking making them visible by a
  // process-wide barrier (membarrier; shim/untracked_slots.h). Later threads share one counter,
  // counted with atomic additions. A single shared counter cost every launch a contended line.
  UntrackedSlots untracked_;
  std::atomic<uint32_t> budget_kernels_{2};
  std::atomic<uint64_t> kernel_ns_{1'000'000};    // measured kernel length (EWMA)
  std::atomic<uint32_t> queued_{0};               // size of pending_, for the fast path's budget test
  std::atomic<uint64_t> gap_ns_{0};               // EWMA of completion-to-next-launch gaps
  std::atomic<bool> priority_busy_{false};        // the current busy period began with a priority launch
  std::atomic<uint64_t> priority_charged_ns_{0};  // its priority work is charged up to here
  Mutex mutex_;
  std::deque<Pending> pending_ GUARDED_BY(mutex_);
  std::unordered_map<CUcontext, std::vector<CUevent>> free_events_ GUARDED_BY(mutex_);
  uint64_t last_completion_ns_ GUARDED_BY(mutex_) = 0;
};

}  // namespace gpuslice::shim
