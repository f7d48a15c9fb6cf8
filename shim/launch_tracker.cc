#include "shim/launch_tracker.h"

#include <time.h>

#include <algorithm>
#include <new>

#include "common/clock.h"
#include "common/mutex_lock.h"
#include "shim/current_context.h"
#include "shim/monitor_cadence.h"
#include "shim/real_driver.h"

namespace gpuslice::shim {
namespace {

using broker::kUntrackedWork;

// A launcher over the budget with no marker to wait for looks again this often (a fraction of a
// kernel, bounded).
constexpr uint64_t kMinPollNs = 20'000;
constexpr uint64_t kMaxPollNs = 200'000;
// A launcher held by the budget in time sleeps at most this long at once, whatever the prediction.
constexpr uint64_t kMaxAheadSleepNs = 10'000'000;

void SleepNanos(uint64_t ns) {
  timespec ts{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
  nanosleep(&ts, nullptr);  // a signal ends it early: the caller loops and re-checks
}

}  // namespace

LaunchTracker::LaunchTracker(ContextSync* contexts, broker::ComputeGate* gate)
    : contexts_(contexts), gate_(gate), published_(&gate->published()), busy_(published_), priority_(gate, published_) {
  // sabotage-point: queue-counted-per-process
  budget_.BindDrainPrediction(&gate->queue_drain_at());
  const RealDriver* real = Real();
  events_usable_ = real->cuEventCreate && real->cuEventRecord && real->cuEventQuery && real->cuEventSynchronize;
  tracking_.store(gate->always_tracked());
}

// Untracked work is counted busy from here to its confirmation. Only when the flag is set (once
// per untracked stretch): the clock read stays off the fast path. Before the flag, so that
// whoever sees the flag sees its start; and before the grant check: "no overlap".
void LaunchTracker::FlagUntrackedWork() {
  if (published_->inflight.load(std::memory_order_relaxed) == 0) busy_.Begin(MonotonicNanos());
  published_->inflight.fetch_or(kUntrackedWork);
  gate_->NoteGrantedLaunch();
}

// A lane lives as long as the process: it is reached through lanes_, never freed. Without memory
// for it the thread launches on the shared lane.
LaunchLane* LaunchTracker::NewLane(uint32_t thread) {
  MutexLock lock(&mutex_);
  LaunchLane* lane = new (std::nothrow) LaunchLane();
  if (!lane) return &shared_lane_;
  lanes_[thread].store(lane, std::memory_order_release);
  uint32_t used = lanes_used_.load(std::memory_order_relaxed);
  while (used < thread + 1 && !lanes_used_.compare_exchange_weak(used, thread + 1)) {
  }
  return lane;
}

bool LaunchTracker::EnterTracked(Entry* entry, bool waited) {
  LaunchLane* lane = LaneOfThisThread();
  // The budget bounds what a holder keeps queued ahead of others; a latency launch within its
  // request passes the grant and is owed the device for what its bucket holds, so it may queue
  // that much (EnterLane takes the priority). Past it — over its request — it is a standard
  // launch, budget and all: a compute-bound tenant declaring `latency` queues no more on a bucket
  // refill than the refill pays for.
  const bool priority = gate_->compute_class() == broker::ComputeClass::kLatency &&
                        WithinPriorityBucket(lane, MonotonicNanos());
  bool claimed = false;
  if (!priority && bounded_.load(std::memory_order_relaxed)) {
    // Enough queued while others share the GPU: wait for a completion, or (beside a latency
    // tenant) until the GPU's queued work is predicted to have at most 1 ms left.
    if (OverBudget(lane)) return false;
    if (budget_.counts_ahead()) [[unlikely]] {
      if (!budget_.ClaimAhead(MonotonicNanos())) return false;
      claimed = true;
    }
  }
  // By address, not by the lane's flag: one dependent load fewer on every launch.
  if (lane != &shared_lane_) [[likely]]
    return EnterLane(lane, entry, waited, claimed);
  MutexLock lock(&shared_lane_mutex_);
  return EnterLane(lane, entry, waited, claimed);
}

// The launch is counted in its lane and, when the lane was idle, the lane in the process's
// published count, before the grant is looked at: a hand-over closes the gate before it looks at
// the count (seq_cst on both sides), so one of the two sees the other. A lane already busy is
// counted there since its thread's (or, shared, the lane mutex's previous holder's) earlier
// launch, which happened before this one's look at the grant.
inline bool LaunchTracker::EnterLane(LaunchLane* lane, Entry* entry, bool waited, bool claimed) {
  entry->lane = lane;
  const auto count_in = [&] {
    const LaunchLane::Entered entered = lane->Add(untracked_.fence());
    entry->lane_was_idle = entered.found_idle;
    // sabotage-point: lane-busy-unpublished.count-in
    return entered.made_busy ? published_->inflight.fetch_add(1) : 1;
  };
  // Counted before the priority is taken: the monitor, woken by the take, renews a priority whose
  // process has work in flight; counted after, it could find the lease new and the process idle,
  // and drop it under the request's first launch (LatencyPriority::Update).
  const uint32_t before = count_in();
  if (gate_->compute_class() == broker::ComputeClass::kLatency) {
    const uint64_t now = MonotonicNanos();
    if (gate_->TakePriority(now)) {
      NoteLaunch(before, now, waited, true);
      if (before != 0) priority_.TakenWithinBusyPeriod(now);
      entry->kind = Entry::Kind::kPriority;
      return true;
    }
  }
  if (!gate_->GrantOpen()) {
    // Turned away: the count is taken back without touching the idle figures (it never ran).
    // sabotage-point: lane-busy-unpublished.turned-away
    if (lane->Remove(1, true, untracked_.fence())) published_->inflight.fetch_sub(1);
    if (claimed) [[unlikely]]
      budget_.UnclaimAhead();
    return false;
  }
  if (before == 0) NoteLaunch(before, 0, waited, false);
  gate_->NoteGrantedLaunch();
  entry->kind = Entry::Kind::kTracked;
  return true;
}

// A launch got in with `before` launches in flight. From idle: a busy period begins, and the gap
// since the last one ended teaches the idle grace (BusyPeriods::LearnGap).
void LaunchTracker::NoteLaunch(uint32_t before, uint64_t now, bool waited, bool priority) {
  if (before != 0) return;
  if (now == 0) now = MonotonicNanos();
  busy_.Begin(now);
  // A priority launch's request waits behind the co-runners' work in flight now: counted beside it
  // until its first charge (LatencyPriority::BeginBusyPeriod). A scan of the published counts, no
  // lock: once per busy period of a latency tenant.
  // sabotage-point: latency-charge-sampled-at-end
  const uint32_t beside = priority ? gate_->ProcessesWithWorkBeside(now) : 0;
  priority_.BeginBusyPeriod(now, priority, QueuedWorkBudget::kBesideLatencyNs, beside);
  if (const std::optional<uint64_t> gap = busy_.GapBefore(now, waited)) {
    busy_.LearnGap(*gap);
    if (priority) priority_.NoteGap(*gap);
  }
}

// sabotage-point: lane-busy-unpublished.went-idle
uint32_t LaunchTracker::LaneWentIdle() { return static_cast<uint32_t>(-1); }

bool LaunchTracker::AdjustInflight(uint32_t delta) {
  return delta != 0 && published_->inflight.fetch_add(delta) + delta == 0;
}

// Often on an application thread, returning from its own synchronisation: nothing here may wait
// for the scheduler lock (another process's decision, that process descheduled, would hold the
// application's synchronisation back, and a latency service's request with it). The
// priority work is charged, and a hand-over waiting for this drain decided, by the monitor
// (LatencyPriority::Update; its next step, 0.1 ms later while the gate is closing).
void LaunchTracker::WentIdle(uint64_t completed_ns) {
  budget_.NoteDrained(completed_ns);
  busy_.End(completed_ns);
  priority_.EndBusyPeriod(completed_ns);
}

void LaunchTracker::CountDownLane(LaunchLane* lane) {
  // sabotage-point: lane-busy-unpublished.count-down
  const bool went_idle = lane->Remove(1, true, untracked_.fence());
  if (went_idle && AdjustInflight(static_cast<uint32_t>(-1))) WentIdle(MonotonicNanos());
}

void LaunchTracker::ExitTracked(const Entry& entry, CUresult launched) {
  if (launched != CUDA_SUCCESS) {
    // Nothing was queued. The shared lane's producer side is its mutex's holder.
    if (entry.lane != &shared_lane_) [[likely]] {
      CountDownLane(entry.lane);
    } else {
      MutexLock lock(&shared_lane_mutex_);
      CountDownLane(entry.lane);
    }
    return;
  }
  if (entry.lane != &shared_lane_) [[likely]] {
    CountSubmitted(entry.lane, entry.target, entry.lane_was_idle);
  } else {
    MutexLock lock(&shared_lane_mutex_);
    CountSubmitted(entry.lane, entry.target, entry.lane_was_idle);
  }
}

// The producer's side of the lane (its thread, or the shared lane's mutex held). No driver call
// but the occasional marker: one when a track has three quarters of the budget's launches unmarked
// while others share the GPU and the launch queues behind another (so at most one and a third per
// budget of queued work), none for a launcher that stays under that between its synchronisations.
inline void LaunchTracker::CountSubmitted(LaunchLane* lane, const LaunchTarget& target, bool lane_was_idle) {
  StreamTrack* track = lane->TrackFor(target.handle, target.context);
  if (!track) [[unlikely]] {
    // Every track busy on other streams: the launch counts as work of unknown extent, which the
    // monitor confirms by synchronising.
    published_->inflight.fetch_or(kUntrackedWork);
    CountDownLane(lane);
    return;
  }
  const uint64_t before = track->Submitted();
  // The track's idleness is read only when the whole lane was idle: `done` is the pollers' line,
  // and its launches then run from now. (A track that goes idle beside a busy one of the lane keeps
  // its earlier start: its next kernel length is measured from its last completion instead.)
  if (lane_was_idle && before == track->Done()) {
    track->busy_since_ns().store(MonotonicNanos(), std::memory_order_relaxed);
    track->marked() = before;
  }
  track->CountSubmitted();
  // A marker only behind a launch queued behind another: a launcher that waits for each launch
  // (or graph) before the next never needs one.
  if (bounded_.load(std::memory_order_relaxed) && before + 1 - track->marked() >= budget_.marker_every() &&
      before != track->Done()) [[unlikely]]
    RecordMarker(track);
}

void LaunchTracker::Wait() {
  LaunchLane* lane = LaneOfThisThread();
  while (gate_->gated()) {
    const uint64_t now = MonotonicNanos();
    const bool priority = gate_->compute_class() == broker::ComputeClass::kLatency && WithinPriorityBucket(lane, now);
    if (!priority && bounded_.load() && tracking_.load() && budget_.AheadTooFar(now)) {
      // Beside a latency tenant, the queue is predicted to drain too late: the running kernel
      // has more than the share left. Sleep until it has no more; no driver call: the prediction
      // is the measured kernel length, and a completion seen meanwhile cuts it back.
      SleepNanos(std::clamp<uint64_t>(budget_.AheadWithinAt(now) - now, kMinPollNs, kMaxAheadSleepNs));
      continue;
    }
    if (!priority && bounded_.load() && tracking_.load() && OverBudget(lane)) {
      // The oldest marker answers in one call whether or not it has completed (a synchronisation
      // of a completed event returns at once): no query first. Without one, ask the streams.
      if (WaitForOldest(lane)) continue;
      Poll(Poller{false, lane, CurrentContext::Get(Real())}, now);
      if (!OverBudget(lane)) return;
      SleepNanos(std::clamp<uint64_t>(budget_.kernel_ns() / 16, kMinPollNs, kMaxPollNs));
      continue;
    }
    if (gate_->GrantOpen()) return;
    if (gate_->compute_class() == broker::ComputeClass::kLatency && tracking_.load()) {
      // A latency launch within its request passes the grant: TryEnter takes the priority.
      if (gate_->TakePriority(now)) return;
    }
    if (tracking_.load()) MarkOwnTails(lane);
    gate_->Acquire();
    return;
  }
}

void LaunchTracker::ConfirmUntrackedWorkDone(uint64_t now) {
  // No launch is on the untracked path once every flag reads 0 after tracking was switched on
  // (each raises its flag before reading the switch).
  untracked_.Drain();
  SynchronizeAndComplete(now);
  // While the flag is set the word is not 0, so nothing else ended the busy period meanwhile.
  const uint32_t before = published_->inflight.fetch_and(~kUntrackedWork);
  if (before == kUntrackedWork) busy_.End(MonotonicNanos());
}

uint64_t LaunchTracker::MonitorStep(uint64_t now) {
  published_->heartbeat_ns.store(now);
  const broker::ComputeGate::Neighbours neighbours = gate_->Survey(now);
  const bool others = neighbours.others;
  const bool want_tracking = others || gate_->always_tracked();
  if (want_tracking && !tracking_.load()) tracking_.store(true);
  // sabotage-point: no-budget
  bounded_.store(others);
  const uint32_t left = Poll(Poller{true, nullptr, nullptr}, now);
  budget_.Update(*gate_, neighbours);
  if (!want_tracking && tracking_.load() && left == 0) tracking_.store(false);
  if (tracking_.load() && ((published_->inflight.load() & kUntrackedWork) || HasUnfollowableWork(now))) {
    ConfirmUntrackedWorkDone(now);
    now = MonotonicNanos();
    published_->heartbeat_ns.store(now);
  }
  priority_.Update(now);
  gate_->Advance(now);
  const bool mine = gate_->HeldByUs();
  const bool hand_over_waits = mine && (gate_->Closing() || (others && gate_->OthersWaiting(now)));
  return MonitorSleepNs(hand_over_waits, published_->priority_until_ns.load() != 0, others, left != 0,
                        priority_.UntilGraceEndsNs(MonotonicNanos()));
}

}  // namespace gpuslice::shim
