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

bool LaunchTracker::EnterTracked(Entry* entry, bool waited) {
  if (bounded_.load(std::memory_order_relaxed) &&
      queued_.load(std::memory_order_relaxed) >= budget_kernels_.load(std::memory_order_relaxed))
    return false;  // enough queued while others share the GPU: wait for a completion
  if (gate_->compute_class() == broker::ComputeClass::kLatency) {
    const uint64_t now = MonotonicNanos();
    if (gate_->TakePriority(now)) {
      const uint32_t before = published_->inflight.fetch_add(1);
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
  // Count the launch before looking at the grant; a hand-over closes the gate before it looks
  // at the count (seq_cst on both sides), so one of the two sees the other. A launch turned away
  // takes its count back without touching the idle figures: it never ran.
  const uint32_t before = published_->inflight.fetch_add(1);
  if (!gate_->GrantOpen()) {
    published_->inflight.fetch_sub(1);
    return false;
  }
  NoteLaunch(before, 0, waited, false);
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

void LaunchTracker::CountDown(uint32_t completed, uint64_t now) {
  if (completed == 0) return;
  const uint32_t after = published_->inflight.fetch_sub(completed) - completed;
  if (after != 0) return;
  if (now == 0) now = MonotonicNanos();
  EndBusyPeriod(now);
  if (priority_busy_.exchange(false, std::memory_order_relaxed)) ChargePriorityUpTo(now);
}

// Priority work is charged as it runs (by the monitor), not only when its busy period ends: a
// latency tenant that keeps its queue full never ends one, and its bucket, never drained, let
// it pass the grant for ever (beside a standard tenant it took the whole device).
void LaunchTracker::ChargePriorityUpTo(uint64_t now) {
  const uint64_t from = priority_charged_ns_.exchange(now, std::memory_order_relaxed);
  if (now > from) gate_->ChargePriorityWork(now - from, now);
}

void LaunchTracker::ExitTracked(CUresult launched, CUstream stream, bool per_thread) {
  if (launched != CUDA_SUCCESS) {
    CountDown(1, 0);  // nothing was queued
    return;
  }
  if (!RecordCompletionEvent(stream, per_thread, MonotonicNanos())) {
    // No event to follow it by (a stream of another context, the driver out of events): the
    // launch counts as work of unknown extent, which the monitor confirms by synchronising.
    published_->inflight.fetch_or(kUntrackedWork);
    CountDown(1, 0);
  }
}

bool LaunchTracker::RecordCompletionEvent(CUstream stream, bool per_thread, uint64_t now) {
  const RealDriver* real = Real();
  // A driver without events (none has been seen, but the hooks never call a null entry point):
  // the launch counts as work of unknown extent.
  if (!real->cuEventCreate || !real->cuEventRecord || !real->cuEventQuery) return false;
  CUcontext context = nullptr;
  if (real->cuCtxGetCurrent(&context) != CUDA_SUCCESS || !context) return false;
  MutexLock lock(&mutex_);
  CUevent event = nullptr;
  auto& pool = free_events_[context];
  if (!pool.empty()) {
    event = pool.back();
    pool.pop_back();
  } else if (real->cuEventCreate(&event, CU_EVENT_DISABLE_TIMING | CU_EVENT_BLOCKING_SYNC) != CUDA_SUCCESS) {
    return false;
  }
  const auto record = per_thread && real->cuEventRecord_ptsz ? real->cuEventRecord_ptsz : real->cuEventRecord;
  if (record(event, stream) != CUDA_SUCCESS) {
    pool.push_back(event);
    return false;
  }
  pending_.push_back(Pending{event, context, now});
  queued_.store(static_cast<uint32_t>(pending_.size()), std::memory_order_relaxed);
  return true;
}

uint32_t LaunchTracker::Poll(uint64_t now) {
  uint32_t completed = 0;
  uint32_t left = 0;
  {
    MutexLock pause(&contexts_->pause_mutex());  // no context is destroyed under our queries
    MutexLock lock(&mutex_);
    const RealDriver* real = Real();
    while (!pending_.empty() && real->cuEventQuery) {
      const Pending& oldest = pending_.front();
      const CUresult rc = real->cuEventQuery(oldest.event);
      if (rc == CUDA_ERROR_NOT_READY) break;
      // Completed (or its context is gone, which ends its work too).
      if (rc == CUDA_SUCCESS) free_events_[oldest.context].push_back(oldest.event);
      const uint64_t started = std::max(oldest.launched_ns, last_completion_ns_);
      if (now > started) {
        const uint64_t measured = now - started;
        const uint64_t ewma = kernel_ns_.load(std::memory_order_relaxed);
        kernel_ns_.store((ewma * 3 + measured) / 4, std::memory_order_relaxed);
      }
      last_completion_ns_ = now;
      pending_.pop_front();
      ++completed;
    }
    left = static_cast<uint32_t>(pending_.size());
    queued_.store(left, std::memory_order_relaxed);
  }
  CountDown(completed, now);
  return left;
}

// Sleeps until the oldest queued launch completes (the event is created with blocking sync, so
// the driver wakes the thread at completion rather than it spinning), or a short while.
void LaunchTracker::WaitForOldest() {
  CUevent oldest = nullptr;
  {
    MutexLock lock(&mutex_);
    if (!pending_.empty()) oldest = pending_.front().event;
  }
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
  while (gate_->gated()) {
    const uint64_t now = MonotonicNanos();
    const bool over_budget = bounded_.load() && tracking_.load() && queued_.load() >= budget_kernels_.load();
    if (over_budget) {
      if (Poll(now) < budget_kernels_.load()) return;
      WaitForOldest();
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

void LaunchTracker::ForgetContext(CUcontext context) {
  uint32_t gone = 0;
  {
    MutexLock lock(&mutex_);
    for (auto it = pending_.begin(); it != pending_.end();) {
      if (!context || it->context == context) {
        it = pending_.erase(it);
        ++gone;
      } else {
        ++it;
      }
    }
    if (context) {
      free_events_.erase(context);
    } else {
      free_events_.clear();
    }
    queued_.store(static_cast<uint32_t>(pending_.size()), std::memory_order_relaxed);
  }
  CountDown(gone, 0);
}

}  // namespace gpuslice::shim
