// The process-local half of the compute gate on one GPU: which of this process's launches are
// still in flight, learnt without a driver call per launch (docs/scheduling.md, "Tracking
// launches by completion").
//
// While the tenant shares the GPU (another tenant has it open), or is limited or of a non-standard
// class, every gated launch is counted in its thread's lane (shim/launch_lane.h), on the track of
// its stream. The process publishes how many of its lanes have launches in flight. Completions
// are learnt from facts, each of which completes every launch counted before it on a stream:
// the application's own synchronisations (free: shim/hooks_sync.cc), queries of a stream or a
// marker by the monitor and by blocked launchers (at most one per track per poll, none for a
// track whose thread waits in a synchronisation of it), and markers — events a launching thread
// records behind a launch only once a track has 3/4 of the budget's launches unmarked, so that a
// launcher over the budget has an older launch to wait for. While others share the GPU the
// process keeps at most a budget of work queued (shim/queued_work_budget.h), so a hand-over waits
// for what is running, not for a backlog.
//
// Alone on the GPU, launches are not tracked (no event, no shared store but a flag that says "work
// of unknown extent"): the fast path stays a few atomic operations. When another tenant arrives,
// the monitor switches tracking on and confirms the untracked work finished, once, by
// synchronising the process's contexts.
//
// LaunchTracker is the facade the launch and synchronisation hooks call. The fast path and the
// untracked/tracked switch are here, inline; each other concern has a file of its own: the
// queued-work budget (shim/queued_work_budget.h), busy periods and the idle grace
// (shim/busy_periods.h), the latency class's priority and its charging (shim/latency_priority.h),
// markers (shim/launch_markers.cc), completions (shim/completion_poll.cc) and the monitor's
// cadence (shim/monitor_cadence.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "broker/compute_gate.h"
#include "broker/sched_terms.h"
#include "common/clock.h"
#include "common/mutex.h"
#include "common/thread_annotations.h"
#include "shim/busy_periods.h"
#include "shim/context_sync.h"
#include "shim/driver_api.h"
#include "shim/latency_priority.h"
#include "shim/launch_lane.h"
#include "shim/queued_work_budget.h"
#include "shim/thread_number.h"
#include "shim/untracked_slots.h"

namespace gpuslice::shim {

// Where a launch goes: the stream as the driver is asked about it (the application's stream,
// CU_STREAM_LEGACY or CU_STREAM_PER_THREAD) and the stream's context.
struct LaunchTarget {
  CUstream handle = nullptr;
  CUcontext context = nullptr;
};

class LaunchTracker {
 public:
  LaunchTracker(ContextSync* contexts, broker::ComputeGate* gate);
  LaunchTracker(const LaunchTracker&) = delete;
  LaunchTracker& operator=(const LaunchTracker&) = delete;

  broker::ComputeGate* gate() const { return gate_; }
  bool tracking() const { return tracking_.load(std::memory_order_relaxed); }

  // How a launch got in: under the tenant's grant (tracked or not) or by latency priority; an
  // untracked one, with the flag it raised (lowered by Exit).
  struct Entry {
    enum class Kind : uint8_t { kUntracked, kTracked, kPriority } kind = Kind::kTracked;
    UntrackedSlots::Ticket ticket;
    LaunchLane* lane = nullptr;  // tracked and priority launches: the thread's lane
    bool lane_was_idle = false;  // its lane had nothing in flight: the launch starts at once
    LaunchTarget target;         // set by the caller
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
  void Exit(const Entry& entry, CUresult launched) {
    if (entry.kind == Entry::Kind::kUntracked) {
      UntrackedSlots::Exit(entry.ticket);
      return;
    }
    ExitTracked(entry, launched);
  }
  // The slow path: blocks (interruptibly) until the grant is this tenant's again or enough of its
  // queued work has completed.
  void Wait();

  // One step of the process's monitor; returns how long it may sleep (shim/monitor_cadence.h).
  uint64_t MonitorStep(uint64_t now);

  // The application destroyed `context` (nullptr: every context of the device): its queued work
  // and events are gone. Call with synchronisation paused (ContextSync::pause_mutex).
  void ForgetContext(CUcontext context);

  // ---- Facts from the application's synchronisations (shim/hooks_sync.cc). A snapshot is taken
  // before the synchronisation is called, and applied once it returned CUDA_SUCCESS: every launch
  // the snapshot counted on the tracks it names is then complete.
  struct Snapshot {
    static constexpr int kMax = 32;
    struct Item {
      LaunchLane* lane;
      uint8_t track;
      uint64_t submitted;
      CUcontext context;
    };
    Item items[kMax];
    int count = 0;
    bool awaits_own = false;  // it marked the calling thread's own tracks as awaited
  };
  // The tracks bound to (handle, context) — any handle when `handle` is nullptr, any context when
  // `context` is — in every lane (`own_only`: in the calling thread's lane only). With `await`
  // (a synchronisation that blocks), the calling thread's own ones are marked awaited.
  // `called_ns` is when the synchronisation (or query) was called, `returned_ns` when it returned.
  void TakeSnapshot(CUstream handle, CUcontext context, bool own_only, bool await, uint64_t called_ns,
                    Snapshot* snapshot);
  void ApplySnapshot(const Snapshot& snapshot, bool completed, uint64_t called_ns, uint64_t returned_ns);
  // The calling thread's track of (handle, context) with launches pending, as a snapshot item:
  // what an event the application records there now stands for (shim/app_events.h).
  bool OwnTrack(CUstream handle, CUcontext context, Snapshot::Item* item);
  // The calling thread's lane, if it has one.
  LaunchLane* OwnLane() const {
    const uint32_t thread = ThreadNumber::Get();
    return thread < kOwnLanes ? lanes_[thread].load(std::memory_order_acquire) : nullptr;
  }
  // The application destroys `stream`: its tracks can no longer be asked about. Their launches
  // become work of unknown extent, which the monitor confirms by synchronising.
  void ForgetStream(CUstream stream);

  // For the benchmarks and tests: the current budget in kernels and the kernel length estimate.
  uint32_t budget_kernels() const { return budget_.kernels(); }
  uint64_t kernel_estimate_ns() const { return budget_.kernel_ns(); }

 private:
  // Lanes of their own for the first kOwnLanes threads that launch tracked work.
  static constexpr uint32_t kOwnLanes = UntrackedSlots::kOwnSlots;
  // A lane's launches beyond its first, as published: enough to tell a backlog from a last
  // kernel, and small enough that every lane's fit in the published word.
  static constexpr uint32_t kMaxExtraPerLane = 63;
  static_assert((kOwnLanes + 1) * kMaxExtraPerLane <= broker::kInflightExtraMax);

  // Who polls: the monitor (any stream it can make current) or a launcher (its own lane, in its
  // current context).
  struct Poller {
    bool monitor = false;
    LaunchLane* own = nullptr;
    CUcontext current = nullptr;
  };

  bool EnterUntracked(Entry* entry, const UntrackedSlots::Ticket& ticket) {
    if ((published_->inflight.load(std::memory_order_relaxed) & broker::kUntrackedWork) == 0) FlagUntrackedWork();
    if (gate_->GrantOpen()) {
      entry->kind = Entry::Kind::kUntracked;
      entry->ticket = ticket;
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
  bool OverBudget(LaunchLane* lane) const { return budget_.Reached(lane->Inflight()); }
  bool WithinPriorityBucket(LaunchLane* lane, uint64_t now) const {
    return priority_.WithinBucket(lane->Inflight(), budget_.kernel_ns(), now);
  }
  bool EnterTracked(Entry* entry, bool waited);
  // Inlined into EnterTracked: the fast path is one call deep.
  // `claimed`: the launch took its place in the predicted queue (QueuedWorkBudget::ClaimAhead), given
  // back if the grant turns it away.
  [[gnu::always_inline]] bool EnterLane(LaunchLane* lane, Entry* entry, bool waited, bool claimed);
  void ExitTracked(const Entry& entry, CUresult launched);
  [[gnu::always_inline]] void CountSubmitted(LaunchLane* lane, const LaunchTarget& target, bool lane_was_idle);
  // Counts one launch of `lane` down (it never reached the GPU).
  void CountDownLane(LaunchLane* lane);

  // ---- Markers (shim/launch_markers.cc).
  // Records a marker behind the track's newest launch (the launching thread).
  void RecordMarker(StreamTrack* track);
  // A launcher over the budget: waits for its lane's oldest marker; false when it has none.
  bool WaitForOldest(LaunchLane* lane);
  // A launcher about to block for the grant: markers behind its launches that only it can
  // follow (its per-thread default stream), so that the monitor can see them complete.
  void MarkOwnTails(LaunchLane* lane);

  // ---- Completions (shim/completion_poll.cc).
  // Takes what is known complete off every lane (the monitor) or off `poller.own`; returns how
  // many launches are still queued.
  uint32_t Poll(const Poller& poller, uint64_t now);
  uint32_t RefreshQueued();
  // Asks the driver about one track (at most one call); the count it is known done up to.
  uint64_t QueryTrack(StreamTrack& track, const Poller& poller, uint64_t now, uint64_t* completed_ns);
  bool CanQuery(const StreamTrack& track, const Poller& poller);
  // `track` is done up to `count`, learnt at `completed_ns` (the lane's consumer mutex held):
  // counts the launches down, measures the kernel length; returns the change to the published
  // in-flight word.
  uint32_t Advance(LaunchLane* lane, StreamTrack& track, uint64_t count, uint64_t completed_ns);
  // When the launches a fact completed finished: at its return when the call that learnt it
  // waited (they finished then); else some time since the track was last looked at, before the
  // call — the middle of that interval.
  static uint64_t CompletionEstimate(StreamTrack& track, uint64_t called_ns, uint64_t returned_ns);
  uint64_t EarliestAnswer(StreamTrack& track) const;
  // A lane's last launch in flight completed: the change to the published word (the lane comes
  // off its count of busy lanes). EnterLane's count_in puts it on.
  static uint32_t LaneWentIdle();
  // Publishes the lane's extra launches after its counts moved; the change to the word.
  uint32_t PublishExtra(LaunchLane* lane);
  // Adds `delta` to the published in-flight word; true when that made it 0 (the process idle).
  bool AdjustInflight(uint32_t delta);
  // The process has nothing in flight any more; its last launch completed at about
  // `completed_ns`.
  void WentIdle(uint64_t completed_ns);
  // The monitor: a lane that has gone quiet with launches no poller can follow — it synchronises
  // the contexts of the gate, which completes everything launched before.
  bool HasUnfollowableWork(uint64_t now);
  void SynchronizeAndComplete(uint64_t now);

  // ---- Busy time and latency priority (shim/busy_periods.h, shim/latency_priority.h).
  void NoteLaunch(uint32_t before, uint64_t now, bool waited, bool priority);
  void ConfirmUntrackedWorkDone(uint64_t now);
  template <typename Visit>
  void ForEachLane(Visit visit) {
    const uint32_t used = lanes_used_.load(std::memory_order_acquire);
    for (uint32_t i = 0; i < used; ++i) {
      if (LaunchLane* lane = lanes_[i].load(std::memory_order_acquire)) visit(lane);
    }
    visit(&shared_lane_);
  }

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
  QueuedWorkBudget budget_;
  BusyPeriods busy_;
  LatencyPriority priority_;
  // The lanes: one per thread for the first kOwnLanes (created at its first tracked launch),
  // then one shared under shared_lane_mutex_. lanes_used_ bounds the indices ever filled.
  std::atomic<LaunchLane*> lanes_[kOwnLanes] = {};
  std::atomic<uint32_t> lanes_used_{0};
  Mutex shared_lane_mutex_;
  LaunchLane shared_lane_;
  Mutex mutex_;  // lane creation
};

}  // namespace gpuslice::shim
