#include "shim/launch_tracker.h"

#include <sched.h>
#include <time.h>

#include <algorithm>

#include "common/clock.h"
#include "common/mutex_lock.h"
#include "shim/real_driver.h"

namespace gpuslice::shim {
namespace {

using broker::kUntrackedWork;

// A blocked launcher looks at its oldest launch this often (a fraction of a kernel, bounded).
constexpr uint64_t kMinPollNs = 20'000;
constexpr uint64_t kMaxPollNs = 200'000;
constexpr uint32_t kMinBudgetKernels = 2;
constexpr uint32_t kMaxBudgetKernels = 1024;

void SleepNanos(uint64_t ns) {
  timespec ts{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
  nanosleep(&ts, nullptr);  // a signal ends it early: the caller loops and re-checks
}

}  // namespace

LaunchTracker::LaunchTracker(ContextSync* contexts, broker::ComputeGate* gate)
    : contexts_(contexts), gate_(gate), published_(&gate->published()) {
  const RealDriver* real = Real();
  events_usable_ = real->cuEventCreate && real->cuEventRecord && real->cuEventQuery;
  tracking_.store(gate->always_tracked());
}

// Untracked work is counted busy from here to its confirmation. Only when the flag is set (once
// per untracked stretch): the clock read stays off the fast path. Before the flag, so that
// whoever sees the flag sees its start; and before the grant check: "no overlap".
void LaunchTracker::FlagUntrackedWork() {
  if (published_->inflight.load(std::memory_order_relaxed) == 0) published_->busy_since_ns.store(MonotonicNanos());
  published_->inflight.fetch_or(kUntrackedWork);
  gate_->NoteGrantedLaunch();
}

LaunchLane* LaunchTracker::NewLane(uint32_t thread) {
  MutexLock lock(&mutex_);
  owned_lanes_.push_back(std::make_unique<LaunchLane>());
  LaunchLane* lane = owned_lanes_.back().get();
  lane->checked_epoch() = forgotten_epoch_.load(std::memory_order_acquire);  // it holds no events yet
  lanes_[thread].store(lane, std::memory_order_release);
  uint32_t used = lanes_used_.load(std::memory_order_relaxed);
  while (used < thread + 1 && !lanes_used_.compare_exchange_weak(used, thread + 1)) {
  }
  return lane;
}

template <typename Visit>
void LaunchTracker::ForEachLane(Visit visit) {
  const uint32_t used = lanes_used_.load(std::memory_order_acquire);
  for (uint32_t i = 0; i < used; ++i) {
    if (LaunchLane* lane = lanes_[i].load(std::memory_order_acquire)) visit(lane);
  }
  visit(&shared_lane_);
}

// The process's queue as of the last poll, or this thread's own, has reached the budget. Only
// the thread's own count is exact between polls: threads launching at once may together queue
// past the budget until the next poll (a fraction of a millisecond while others share the GPU).
bool LaunchTracker::OverBudget(LaunchLane* lane) const {
  const uint32_t budget = budget_kernels_.load(std::memory_order_relaxed);
  return queued_.load(std::memory_order_relaxed) >= budget || lane->Queued() >= budget;
}

bool LaunchTracker::EnterTracked(Entry* entry, bool waited) {
  LaunchLane* lane = LaneOfThisThread();
  if (bounded_.load(std::memory_order_relaxed) && OverBudget(lane))
    return false;  // enough queued while others share the GPU: wait for a completion
  // By address, not by the lane's flag: one dependent load fewer on every launch.
  if (lane != &shared_lane_) [[likely]]
    return EnterLane(lane, entry, waited);
  MutexLock lock(&shared_lane_mutex_);
  return EnterLane(lane, entry, waited);
}

// Counts the launch in its lane, and the lane in the process's published word when it was idle;
// returns the word before (not 0 when the lane was already busy: the process was too).
uint32_t LaunchTracker::CountIn(LaunchLane* lane, Entry* entry) {
  entry->lane_was_idle = lane->Add() == 0;
  return entry->lane_was_idle ? published_->inflight.fetch_add(1) : 1;
}

// The launch is counted in its lane and, when the lane was idle, the lane in the process's
// published count, before the grant is looked at: a hand-over closes the gate before it looks at
// the count (seq_cst on both sides), so one of the two sees the other. A lane already busy is
// counted there since its thread's (or, shared, the lane mutex's previous holder's) earlier
// launch, which happened before this one's look at the grant.
inline bool LaunchTracker::EnterLane(LaunchLane* lane, Entry* entry, bool waited) {
  entry->lane = lane;
  if (gate_->compute_class() == broker::ComputeClass::kLatency) {
    const uint64_t now = MonotonicNanos();
    if (gate_->TakePriority(now)) {
      const uint32_t before = CountIn(lane, entry);
      NoteLaunch(before, now, waited, true);
      // Priority taken again within a busy period (its bucket refilled): charged from here. Not
      // charged, the bucket refilled to full and the tenant passed the grant for good.
      if (before != 0 && !priority_busy_.load(std::memory_order_relaxed)) {
        priority_charged_ns_.store(now, std::memory_order_relaxed);
        priority_busy_.store(true, std::memory_order_relaxed);
      }
      entry->kind = Entry::Kind::kPriority;
      return true;
    }
  }
  const uint32_t before = CountIn(lane, entry);
  if (!gate_->GrantOpen()) {
    // Turned away: the count is taken back without touching the idle figures (it never ran).
    if (lane->Remove(1) == 0) published_->inflight.fetch_sub(1);
    return false;
  }
  if (before == 0) NoteLaunch(before, 0, waited, false);
  gate_->NoteGrantedLaunch();
  entry->kind = Entry::Kind::kTracked;
  return true;
}

// A launch got in with `before` launches in flight. From idle: how long since its last launch
// completed tells this process's launch gaps, from which its idle grace is set (a synchronous
// launcher must not look idle between kernels). A launch that first waited for the grant or the
// budget says nothing about the program's own gaps.
void LaunchTracker::NoteLaunch(uint32_t before, uint64_t now, bool waited, bool priority) {
  if (before != 0) return;
  if (now == 0) now = MonotonicNanos();
  published_->busy_since_ns.store(now);
  priority_charged_ns_.store(now, std::memory_order_relaxed);
  priority_busy_.store(priority, std::memory_order_relaxed);
  const uint64_t idle_since = published_->idle_since_ns.load(std::memory_order_relaxed);
  if (waited || idle_since == 0 || now <= idle_since || now - idle_since >= broker::kMaxGraceNs) return;
  const uint64_t gap = now - idle_since;
  const uint64_t ewma = gap_ns_.load(std::memory_order_relaxed);
  const uint64_t updated = ewma == 0 ? gap : (ewma * 7 + gap) / 8;
  gap_ns_.store(updated, std::memory_order_relaxed);
  published_->grace_ns.store(
      static_cast<uint32_t>(std::clamp<uint64_t>(4 * updated + 50'000, broker::kMinGraceNs, broker::kMaxGraceNs)));
}

// Nothing in flight any more: the busy period since busy_since_ns is added to the process's busy
// time (before idle_since_ns moves, which a decision reads as the period's end).
void LaunchTracker::EndBusyPeriod(uint64_t now) {
  const uint64_t since = published_->busy_since_ns.load();
  if (since != 0 && now > since) published_->busy_total_ns.fetch_add(now - since);
  published_->idle_since_ns.store(now);
}

bool LaunchTracker::AdjustInflight(uint32_t delta) {
  return delta != 0 && published_->inflight.fetch_add(delta) + delta == 0;
}

void LaunchTracker::WentIdle(uint64_t now, uint64_t completed_ns) {
  if (now == 0) now = MonotonicNanos();
  EndBusyPeriod(now);
  if (priority_busy_.exchange(false, std::memory_order_relaxed))
    ChargePriorityUpTo(completed_ns != 0 ? completed_ns : now);
}

// A poll that finds the last launch complete knows only that it completed since the previous
// poll (the monitor's are 200 µs apart while priority work is in flight): the midpoint of that
// interval, not the poll, is the estimate charged to the priority bucket. Charged up to the poll,
// a latency tenant lost half a poll interval per request — 100 µs of a 2.7 ms request, enough to
// run a service using 0.9 of its request out of priority on a loaded host.
uint64_t LaunchTracker::CompletionEstimate(uint64_t previous_poll, uint64_t now) const {
  const uint64_t since = std::max(previous_poll, priority_charged_ns_.load(std::memory_order_relaxed));
  return since != 0 && since < now ? since + (now - since) / 2 : now;
}

void LaunchTracker::CountDownLane(LaunchLane* lane) {
  if (lane->Remove(1) == 0 && AdjustInflight(static_cast<uint32_t>(-1))) WentIdle(0);
}

// Priority work is charged as it runs (by the monitor), not only when its busy period ends: a
// latency tenant that keeps its queue full never ends one, and its bucket, never drained, let
// it pass the grant for ever (beside a standard tenant it took the whole device).
void LaunchTracker::ChargePriorityUpTo(uint64_t now) {
  const uint64_t from = priority_charged_ns_.exchange(now, std::memory_order_relaxed);
  if (now > from) gate_->ChargePriorityWork(now - from, now);
}

void LaunchTracker::ExitTracked(const Entry& entry, CUresult launched, CUstream stream, bool per_thread) {
  if (launched != CUDA_SUCCESS) {
    CountDownLane(entry.lane);  // nothing was queued
    return;
  }
  // The clock is read only for a launch into an idle lane: one queued behind another starts when
  // that one completes, which the poller sees.
  const uint64_t launched_ns = entry.lane_was_idle ? MonotonicNanos() : 0;
  bool recorded = false;
  if (entry.lane != &shared_lane_) [[likely]] {
    recorded = RecordCompletionEvent(entry.lane, entry.context, stream, per_thread, launched_ns);
  } else {
    MutexLock lock(&shared_lane_mutex_);
    recorded = RecordCompletionEvent(entry.lane, entry.context, stream, per_thread, launched_ns);
  }
  if (!recorded) {
    // No event to follow it by (a stream of another context, the driver out of events): the
    // launch counts as work of unknown extent, which the monitor confirms by synchronising.
    published_->inflight.fetch_or(kUntrackedWork);
    CountDownLane(entry.lane);
  }
}

// The producer's side of the lane (its thread, or the shared lane's mutex held).
inline bool LaunchTracker::RecordCompletionEvent(LaunchLane* lane, CUcontext context, CUstream stream, bool per_thread,
                                                 uint64_t launched_ns) {
  // A driver without events (none has been seen, but the hooks never call a null entry point):
  // the launch counts as work of unknown extent.
  if (!events_usable_ || !context) return false;
  const RealDriver* real = Real();
  if (lane->checked_epoch() != forgotten_epoch_.load(std::memory_order_acquire)) DropForgottenEvents(lane);
  if (lane->Full() && !MakeRoom(lane)) return false;
  LaunchLane::Slot& slot = lane->Next();
  if (slot.event && slot.context != context) {
    lane->spares().emplace_back(slot.context, slot.event);
    slot.event = nullptr;
  }
  if (!slot.event) {
    slot.event = EventFor(lane, context);
    if (!slot.event) return false;
    slot.context = context;
  }
  const auto record = per_thread && real->cuEventRecord_ptsz ? real->cuEventRecord_ptsz : real->cuEventRecord;
  if (record(slot.event, stream) != CUDA_SUCCESS) return false;  // the slot keeps its unused event
  slot.stream = stream;
  slot.per_thread = per_thread;
  slot.launched_ns = launched_ns;
  slot.gone = false;
  lane->Publish();
  return true;
}

// An unused event of `context`: a spare of the lane's, or a new one.
CUevent LaunchTracker::EventFor(LaunchLane* lane, CUcontext context) {
  auto& spares = lane->spares();
  for (auto it = spares.begin(); it != spares.end(); ++it) {
    if (it->first == context) {
      const CUevent event = it->second;
      spares.erase(it);
      return event;
    }
  }
  CUevent event = nullptr;
  if (Real()->cuEventCreate(&event, CU_EVENT_DISABLE_TIMING | CU_EVENT_BLOCKING_SYNC) != CUDA_SUCCESS) return nullptr;
  return event;
}

// Every slot of the lane holds a launch not yet seen complete: poll, and wait for the lane's
// oldest while none completed (the driver's own queue would make the launcher wait too).
bool LaunchTracker::MakeRoom(LaunchLane* lane) {
  while (true) {
    PollOwnLane(lane, MonotonicNanos());
    if (!lane->Full()) return true;
    WaitForOldest(lane);
  }
}

// Contexts were destroyed since the lane's unused events were last checked: those of the
// destroyed contexts are dropped (they went with their context; a new context may come back
// with the same handle). Not destroyed: the driver already did.
void LaunchTracker::DropForgottenEvents(LaunchLane* lane) {
  MutexLock lock(&mutex_);
  MutexLock consumer(&lane->consumer_mutex());  // no poller while the free slots are visited
  const uint64_t checked = lane->checked_epoch();
  const std::vector<std::pair<uint64_t, CUcontext>> teardowns = forgotten_;  // the lambdas are not analysed
  const auto forgotten = [&](CUcontext context) {
    for (const auto& [epoch, gone] : teardowns) {
      if (epoch > checked && (!gone || gone == context)) return true;
    }
    return false;
  };
  lane->ForEachFreeSlot([&](LaunchLane::Slot& slot) {
    if (slot.event && forgotten(slot.context)) slot.event = nullptr;
  });
  std::erase_if(lane->spares(), [&](const auto& spare) { return forgotten(spare.first); });
  lane->checked_epoch() = forgotten_epoch_.load(std::memory_order_acquire);
}

uint32_t LaunchTracker::Poll(uint64_t now) {
  uint32_t queued = 0;
  uint32_t delta = 0;
  {
    MutexLock pause(&contexts_->pause_mutex());  // no context is destroyed under our queries
    ForEachLane([&](LaunchLane* lane) {
      MutexLock consumer(&lane->consumer_mutex());
      const Polled polled = PollLane(lane, now);
      queued += polled.queued;
      delta += polled.delta;
    });
  }
  queued_.store(queued, std::memory_order_relaxed);
  const uint64_t previous = last_poll_ns_.exchange(now, std::memory_order_relaxed);
  if (AdjustInflight(delta)) WentIdle(now, CompletionEstimate(previous, now));
  return queued;
}

void LaunchTracker::PollOwnLane(LaunchLane* lane, uint64_t now) {
  Polled polled;
  {
    MutexLock pause(&contexts_->pause_mutex());
    MutexLock consumer(&lane->consumer_mutex());
    polled = PollLane(lane, now);
  }
  if (AdjustInflight(polled.delta)) WentIdle(now);
}

bool LaunchTracker::Completed(LaunchLane::Slot& slot) {
  if (slot.gone) return true;  // its context was destroyed, and its work with it
  const RealDriver* real = Real();
  if (!real->cuEventQuery) return false;
  const CUresult rc = real->cuEventQuery(slot.event);
  if (rc == CUDA_ERROR_NOT_READY) return false;
  if (rc != CUDA_SUCCESS) slot.event = nullptr;  // its context is gone, the event with it
  return true;
}

// Takes the lane's completed launches off, oldest first. Launches into one stream complete in
// order: of a run of them, the last is asked first, and when it completed the whole run did;
// when it did not, the first not completed is found by halving. A thread that keeps one stream
// busy is polled in a few queries, and the poller reads a few of its slots, not every one: a
// slot line the poller has read costs the launching thread a cache miss when it writes it next.
//
// What is left is published: a lane with nothing left in flight comes off the count of busy
// threads; one with more than one launch in flight adds the rest to the published extra (at
// most kMaxExtraPerLane). The caller adds the change to the published word in one addition:
// the word reaches 0 only there or at a launcher's own count-down, and whoever brings it to 0
// ends the busy period.
LaunchTracker::Polled LaunchTracker::PollLane(LaunchLane* lane, uint64_t now) {
  const uint64_t head = lane->ConsumerHead();
  uint64_t tail = lane->ConsumerTail();
  const uint64_t first = tail;
  while (tail < head) {
    // The run [tail, run_end): the last one, which began at RunStart, reaches the head without
    // its slots being read.
    uint64_t run_end = head;
    if (lane->RunStart() > tail) {
      run_end = tail + 1;
      while (run_end < head && lane->At(run_end).SameStream(lane->At(tail))) ++run_end;
    }
    if (Completed(lane->At(run_end - 1))) {
      tail = run_end;
      continue;
    }
    if (run_end - tail == 1 || !Completed(lane->At(tail))) break;
    uint64_t done = tail, pending = run_end - 1;  // completed / not completed
    while (pending - done > 1) {
      const uint64_t mid = done + (pending - done) / 2;
      (Completed(lane->At(mid)) ? done : pending) = mid;
    }
    tail = done + 1;
    break;
  }
  Polled polled;
  uint32_t inflight = 0;
  if (tail != first) {
    // The first launch taken off started when it was launched into the idle lane or when the
    // lane's previous launch was seen complete; later ones taken off by this poll ran after it.
    const uint64_t started = std::max(lane->At(first).launched_ns, lane->last_completion_ns());
    if (now > started) {
      const uint64_t ewma = kernel_ns_.load(std::memory_order_relaxed);
      kernel_ns_.store((ewma * 3 + (now - started)) / 4, std::memory_order_relaxed);
    }
    lane->last_completion_ns() = now;
    lane->Release(tail);
    inflight = lane->Remove(static_cast<uint32_t>(tail - first));
    if (inflight == 0) polled.delta -= 1;
  } else {
    inflight = lane->Inflight();
  }
  const uint32_t extra = inflight > 1 ? std::min(inflight - 1, kMaxExtraPerLane) : 0;
  polled.delta += (extra - lane->published_extra()) << broker::kInflightExtraShift;
  lane->published_extra() = extra;
  polled.queued = static_cast<uint32_t>(head - tail);
  return polled;
}

// Sleeps until the lane's oldest queued launch (or, with none, the process's) completes — the
// event is created with blocking sync, so the driver wakes the thread at completion rather than
// it spinning — or a short while.
void LaunchTracker::WaitForOldest(LaunchLane* lane) {
  CUevent oldest = nullptr;
  const auto oldest_of = [&](LaunchLane* l) {
    if (oldest) return;
    MutexLock consumer(&l->consumer_mutex());
    const uint64_t tail = l->ConsumerTail();
    if (tail < l->ConsumerHead() && !l->At(tail).gone) oldest = l->At(tail).event;
  };
  if (lane) oldest_of(lane);
  ForEachLane(oldest_of);
  const RealDriver* real = Real();
  if (!oldest || !real->cuEventSynchronize || real->cuEventSynchronize(oldest) != CUDA_SUCCESS)
    SleepNanos(std::clamp<uint64_t>(kernel_ns_.load(std::memory_order_relaxed) / 16, kMinPollNs, kMaxPollNs));
}

// At least two kernels (unlimited tenants): one running and the next queued behind it. With one, the device idled at
// every completion for as long as the launcher took to wake and launch again (a few percent of
// the device with 4 ms kernels, lost whenever another tenant merely had the GPU open).
void LaunchTracker::UpdateBudget() {
  const uint64_t kernel = std::max<uint64_t>(kernel_ns_.load(std::memory_order_relaxed), 1);
  const uint64_t kernels = (gate_->BudgetNs() + kernel - 1) / kernel;
  // A limited tenant's grant ends with its queue drained (its limit is a ceiling): one kernel
  // queued at least, as a waiter owed the GPU waits for what it has queued.
  const uint64_t least = gate_->limited() ? 1 : kMinBudgetKernels;
  budget_kernels_.store(static_cast<uint32_t>(std::clamp<uint64_t>(kernels, least, kMaxBudgetKernels)),
                        std::memory_order_relaxed);
}

void LaunchTracker::Wait() {
  LaunchLane* lane = LaneOfThisThread();
  while (gate_->gated()) {
    const uint64_t now = MonotonicNanos();
    if (bounded_.load() && tracking_.load() && OverBudget(lane)) {
      Poll(now);
      if (!OverBudget(lane)) return;
      WaitForOldest(lane);
      continue;
    }
    if (gate_->GrantOpen()) return;
    if (gate_->compute_class() == broker::ComputeClass::kLatency && tracking_.load()) {
      // A latency launch within its request passes the grant: TryEnter takes the priority.
      if (gate_->TakePriority(now)) return;
    }
    gate_->Acquire();
    return;
  }
}

void LaunchTracker::ConfirmUntrackedWorkDone(uint64_t now) {
  // No launch is on the untracked path once every flag reads 0 after tracking was switched on
  // (each raises its flag before reading the switch).
  untracked_.Drain();
  contexts_->SynchronizeGate(gate_);
  const uint32_t after = published_->inflight.fetch_and(~kUntrackedWork) & ~kUntrackedWork;
  if (after == 0) EndBusyPeriod(now);
}

uint64_t LaunchTracker::MonitorStep(uint64_t now) {
  published_->heartbeat_ns.store(now);
  const bool others = gate_->OthersPresent();
  const bool want_tracking = others || gate_->always_tracked();
  if (want_tracking && !tracking_.load()) tracking_.store(true);
  bounded_.store(others);
  const uint32_t left = Poll(now);
  UpdateBudget();
  if (!want_tracking && tracking_.load() && left == 0) tracking_.store(false);
  if (tracking_.load() && (published_->inflight.load() & kUntrackedWork)) {
    ConfirmUntrackedWorkDone(now);
    now = MonotonicNanos();
    published_->heartbeat_ns.store(now);
  }
  // Latency priority lasts while this process has work in flight or is between two launches, and
  // its tenant is within its request (the bucket, drained by the work as it runs, holds time).
  // Dropped, the rest of the busy period runs under the grant like a standard tenant's.
  if (published_->priority_until_ns.load() != 0) {
    constexpr uint64_t kChargeEveryNs = 1'000'000;  // each charge takes the scheduler lock
    if (priority_busy_.load(std::memory_order_relaxed) &&
        now - priority_charged_ns_.load(std::memory_order_relaxed) >= kChargeEveryNs)
      ChargePriorityUpTo(now);
    const uint64_t grace = std::clamp<uint64_t>(published_->grace_ns.load(), broker::kMinGraceNs, broker::kMaxGraceNs);
    const bool active = published_->inflight.load() != 0 || now - published_->idle_since_ns.load() < grace;
    if (active && gate_->PriorityBucketHasTime(now)) {
      gate_->RenewPriority(now);
    } else {
      if (priority_busy_.exchange(false, std::memory_order_relaxed)) ChargePriorityUpTo(now);
      gate_->DropPriority();
    }
  }
  gate_->Advance(now);
  const bool mine = gate_->HeldByUs();
  if (mine && (gate_->Closing() || (others && gate_->OthersWaiting(now)))) return 100'000;
  if (published_->priority_until_ns.load() != 0) return 200'000;
  if (others) return left ? 200'000 : 1'000'000;
  return left ? 1'000'000 : 5'000'000;
}

// The launches of `context` queued on any lane are done (their work went with the context); the
// lanes' unused events of it are dropped before their next launch (DropForgottenEvents).
void LaunchTracker::ForgetContext(CUcontext context) {
  const uint64_t now = MonotonicNanos();
  uint32_t delta = 0;
  {
    MutexLock lock(&mutex_);
    ForEachLane([&](LaunchLane* lane) {
      MutexLock consumer(&lane->consumer_mutex());
      for (uint64_t i = lane->ConsumerTail(); i < lane->ConsumerHead(); ++i) {
        LaunchLane::Slot& slot = lane->At(i);
        if (!context || slot.context == context) {
          slot.gone = true;
          slot.event = nullptr;
        }
      }
      delta += PollLane(lane, now).delta;  // the caller holds the pause
    });
    const uint64_t epoch = forgotten_epoch_.load(std::memory_order_relaxed) + 1;
    forgotten_.emplace_back(epoch, context);
    if (forgotten_.size() > kForgottenContexts) {
      // Lanes that have not launched for this many teardowns drop every unused event: those of
      // contexts still alive are lost (not destroyed), the price of a bounded list.
      forgotten_.clear();
      forgotten_.emplace_back(epoch, nullptr);
    }
    forgotten_epoch_.store(epoch, std::memory_order_release);
  }
  if (AdjustInflight(delta)) WentIdle(now);
}

}  // namespace gpuslice::shim
