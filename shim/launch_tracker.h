// The process-local half of the compute gate on one GPU: which of this process's launches are
// still in flight, tracked by completion rather than by synchronising.
//
// While the tenant shares the GPU (another tenant has it open), or is limited or of a non-standard
// class, every gated launch is followed by an event recorded into its thread's lane
// (shim/launch_lane.h). The process publishes how many of its lanes have launches in flight; the
// monitor and blocked launchers poll the lanes' oldest events (cuEventQuery) and count
// completions down. While others share the GPU the process keeps at most a budget of work queued
// (the GPU's budget over the measured kernel length, at least one kernel), so a hand-over waits
// for what is running, not for a backlog.
//
// Alone on the GPU, launches are not tracked (no event, no shared store but a flag that says "work
// of unknown extent"): the fast path stays a few atomic operations. When another tenant arrives,
// the monitor switches tracking on and confirms the untracked work finished, once, by
// synchronising the process's contexts.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "broker/scheduler.h"
#include "common/mutex.h"
#include "common/thread_annotations.h"
#include "shim/context_sync.h"
#include "shim/driver_api.h"
#include "shim/launch_lane.h"
#include "shim/thread_number.h"
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
    LaunchLane* lane = nullptr;   // tracked and priority launches: the thread's lane
    bool lane_was_idle = false;   // its lane had nothing in flight: the launch starts at once
    CUcontext context = nullptr;  // current at the launch (set by the caller)
  };

  // The fast path. True: the caller may launch now and must then call Exit. False: call Wait,
  // then try again (with `waited`). Inline up to the untracked launch, the whole of it while the
  // tenant is alone on the GPU.
  [[gnu::always_inline]] bool TryEnter(Entry* entry, bool waited = false) {
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
    ExitTracked(entry, launched, stream, per_thread);
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
  // Lanes of their own for the first kOwnLanes threads that launch tracked work.
  static constexpr uint32_t kOwnLanes = UntrackedSlots::kOwnSlots;
  // Context teardowns remembered for lanes whose unused events predate them; past this many,
  // one entry standing for every context.
  static constexpr size_t kForgottenContexts = 64;
  // A lane's launches beyond its first, as published: enough to tell a backlog from a last
  // kernel, and small enough that every lane's fit in the published word.
  static constexpr uint32_t kMaxExtraPerLane = 63;
  static_assert((kOwnLanes + 1) * kMaxExtraPerLane <= broker::kInflightExtraMax);

  bool EnterUntracked(Entry* entry, const UntrackedSlots::Ticket& ticket) {
    if ((published_->inflight.load(std::memory_order_relaxed) & broker::kUntrackedWork) == 0) FlagUntrackedWork();
    if (gate_->GrantOpen()) {
      *entry = Entry{Entry::Kind::kUntracked, ticket, nullptr};
      return true;
    }
    UntrackedSlots::Exit(ticket);
    return false;
  }
  void FlagUntrackedWork();
  LaunchLane* LaneOfThisThread() {
    const uint32_t thread = ThreadNumber::Get();
    if (thread >= kOwnLanes) return &shared_lane_;
    if (LaunchLane* lane = lanes_[thread].load(std::memory_order_acquire)) return lane;
    return NewLane(thread);
  }
  LaunchLane* NewLane(uint32_t thread);
  bool OverBudget(LaunchLane* lane) const;
  bool EnterTracked(Entry* entry, bool waited);
  // Inlined into EnterTracked: the fast path is one call deep.
  [[gnu::always_inline]] bool EnterLane(LaunchLane* lane, Entry* entry, bool waited);
  uint32_t CountIn(LaunchLane* lane, Entry* entry);
  void ExitTracked(const Entry& entry, CUresult launched, CUstream stream, bool per_thread);
  [[gnu::always_inline]] bool RecordCompletionEvent(LaunchLane* lane, CUcontext context, CUstream stream,
                                                    bool per_thread, uint64_t launched_ns);
  // Whether a queued launch has completed (or can no longer be asked about).
  static bool Completed(LaunchLane::Slot& slot);
  CUevent EventFor(LaunchLane* lane, CUcontext context);
  bool MakeRoom(LaunchLane* lane);
  void DropForgottenEvents(LaunchLane* lane);
  // Counts one launch of `lane` down (it never reached the GPU).
  void CountDownLane(LaunchLane* lane);
  // Takes completed launches off every lane; returns how many are still queued.
  uint32_t Poll(uint64_t now);
  // Takes completed launches off `lane` alone (its consumer mutex and the pause held): how many
  // are still queued on it, and the change to the published in-flight word.
  struct Polled {
    uint32_t queued = 0;
    uint32_t delta = 0;  // modulo 2^32
  };
  Polled PollLane(LaunchLane* lane, uint64_t now);
  // The same, taking the locks; for a launcher whose lane is full.
  void PollOwnLane(LaunchLane* lane, uint64_t now);
  // Adds `delta` to the published in-flight word; true when that made it 0 (the process idle).
  bool AdjustInflight(uint32_t delta);
  // The process has nothing in flight any more, as of `now`; its last launch completed at about
  // `completed_ns` (0: at `now`).
  void WentIdle(uint64_t now, uint64_t completed_ns = 0);
  uint64_t CompletionEstimate(uint64_t previous_poll, uint64_t now) const;
  void EndBusyPeriod(uint64_t now);
  void ChargePriorityUpTo(uint64_t now);
  void NoteLaunch(uint32_t before, uint64_t now, bool waited, bool priority);
  void ConfirmUntrackedWorkDone(uint64_t now);
  void WaitForOldest(LaunchLane* lane);
  void UpdateBudget();
  template <typename Visit>
  void ForEachLane(Visit visit);

  ContextSync* contexts_;
  broker::ComputeGate* gate_;
  broker::ProcessGpuState* published_;
  bool events_usable_ = false;  // the driver has the event entry points (set once, at construction)
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
  std::atomic<uint32_t> queued_{0};               // launches queued on every lane, as of the last poll
  std::atomic<uint64_t> gap_ns_{0};               // EWMA of completion-to-next-launch gaps
  std::atomic<bool> priority_busy_{false};        // the current busy period began with a priority launch
  std::atomic<uint64_t> priority_charged_ns_{0};  // its priority work is charged up to here
  std::atomic<uint64_t> last_poll_ns_{0};         // when Poll last looked at every lane
  // The lanes: one per thread for the first kOwnLanes (created at its first tracked launch),
  // then one shared under shared_lane_mutex_. lanes_used_ bounds the indices ever filled.
  std::atomic<LaunchLane*> lanes_[kOwnLanes] = {};
  std::atomic<uint32_t> lanes_used_{0};
  Mutex shared_lane_mutex_;
  LaunchLane shared_lane_;
  // How many context teardowns the tracker has seen; a lane whose unused events were checked at
  // an older count drops those of the contexts destroyed since (forgotten_) before its next
  // launch: a new context may come back with a destroyed one's handle.
  std::atomic<uint64_t> forgotten_epoch_{0};
  Mutex mutex_;  // lane creation, the forgotten contexts
  std::vector<std::unique_ptr<LaunchLane>> owned_lanes_ GUARDED_BY(mutex_);
  std::vector<std::pair<uint64_t, CUcontext>> forgotten_ GUARDED_BY(mutex_);  // nullptr: every context
};

}  // namespace gpuslice::shim
