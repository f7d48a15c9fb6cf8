// How a launch tracker learns that launches completed (shim/launch_tracker.h): polls of the
// tracks by the monitor and by blocked launchers, facts from the application's synchronisations,
// the monitor's own synchronisation of contexts, and contexts the application destroyed.
#include <algorithm>

#include "common/clock.h"
#include "common/mutex_lock.h"
#include "shim/current_context.h"
#include "shim/launch_tracker.h"
#include "shim/real_driver.h"

namespace gpuslice::shim {
namespace {

// The monitor asks the driver about one track at most this often: its queries cost host time
// (about half a microsecond each on a real driver) and a track with 20 µs kernels would otherwise
// be asked about several times per kernel.
constexpr uint64_t kMinQueryGapNs = 100'000;
// A track whose thread waits in a synchronisation of it is left to that thread — which learns
// its completion as it returns — for this long: longer than most kernels and graphs, so that a
// thread waiting for a 10 ms graph costs no query; bounded, so that a wait for something else that
// also covers the track (a context's other streams) delays what pollers learn by at most this.
constexpr uint64_t kAwaitTrustNs = 50'000'000;
// A track only its own thread can ask about that has not moved for this long, while another
// tenant shares the GPU, is confirmed by synchronising its context.
constexpr uint64_t kQuietOwnerTrackNs = 2'000'000;
// The monitor skips a question it knows cannot be answered "complete" yet for at most this long.
constexpr uint64_t kMaxQuietNs = 1'000'000;
// A synchronisation that took longer than this waited for the work: it completed as it returned.
constexpr uint64_t kWaitedNs = 20'000;

}  // namespace

// The driver answers about a stream in its context: the monitor makes that context current on
// its own thread, where nothing else changes it (pause_mutex is held: the context is not being
// destroyed); a launcher asks only about streams of its current context, and only it about its
// per-thread default stream.
bool LaunchTracker::CanQuery(const StreamTrack& track, const Poller& poller) {
  if (!poller.monitor) return poller.current == track.context();
  if (track.access() == StreamTrack::Access::kOwnerThread) return false;
  if (CurrentContext::Get(Real()) != track.context()) {
    if (Real()->cuCtxSetCurrent(track.context()) != CUDA_SUCCESS) return false;
    CurrentContext::Set(track.context());
  }
  return true;
}

namespace {

// Whether an answer other than CUDA_SUCCESS still means the launches asked about are over: the
// event or stream is gone with its context, or the context broke (a fault is sticky: nothing
// of it will ever complete otherwise). Not when the question could not be asked.
bool AnswerEndsTheWork(CUresult rc) {
  return rc != CUDA_ERROR_NOT_READY && rc != CUDA_ERROR_INVALID_CONTEXT && rc != CUDA_ERROR_NOT_INITIALIZED;
}

}  // namespace

// One call at most: the oldest marker not known complete, or, with none left, the stream. The
// launches of a track complete in order, so either answers for every launch before it.
uint64_t LaunchTracker::QueryTrack(StreamTrack& track, const Poller& poller, uint64_t now, uint64_t* completed_ns) {
  const uint64_t submitted = track.Submitted();
  if (submitted == track.Done()) return 0;
  track.DropStaleMarkers();
  if (poller.monitor) {
    const uint64_t awaited = track.awaited_since_ns().load(std::memory_order_relaxed);
    if (awaited != 0 && now - awaited < kAwaitTrustNs) return 0;
    if (now - track.queried_ns() < kMinQueryGapNs) return 0;
    // sabotage-point: monitor-asks-too-early
    if (now < EarliestAnswer(track)) return 0;
  }
  const RealDriver* real = Real();
  const uint64_t estimate = CompletionEstimate(track, now, now);
  if (track.HasMarker()) {
    StreamTrack::Marker& marker = track.OldestMarker();
    track.queried_ns() = now;
    const CUresult rc = marker.event ? real->cuEventQuery(marker.event) : CUDA_ERROR_INVALID_HANDLE;
    if (!AnswerEndsTheWork(rc)) return 0;
    if (rc != CUDA_SUCCESS) marker.event = nullptr;  // its context is gone, the event with it
    const uint64_t covers = marker.covers;
    track.PopMarker();
    *completed_ns = estimate;
    return covers;
  }
  if (!real->cuStreamQuery || !CanQuery(track, poller)) return 0;
  track.queried_ns() = now;
  const CUresult rc = real->cuStreamQuery(track.handle());
  if (!AnswerEndsTheWork(rc)) return 0;
  // Idle — or gone (the application destroyed the stream): nothing more will be learnt of it.
  *completed_ns = estimate;
  return submitted;
}

// When the monitor's question about a track can first be answered "complete": what it would ask
// about (the oldest marker, or the whole track) is that many launches behind the last completion
// learnt, each at least half the measured kernel length. Asked earlier, the driver can only say
// "not ready" — a call wasted on the host. Bounded, so that a kernel length measured long ago
// delays what the monitor learns by at most kMaxQuietNs.
uint64_t LaunchTracker::EarliestAnswer(StreamTrack& track) const {
  const uint64_t from = std::max(track.progress_ns(), track.busy_since_ns().load(std::memory_order_relaxed));
  const uint64_t asked_about = track.HasMarker() ? track.OldestMarker().covers : track.Submitted();
  if (from == 0 || asked_about <= track.Done()) return 0;
  const uint64_t half_kernel = budget_.kernel_ns() / 2;
  const uint64_t ahead = asked_about - track.Done();
  const uint64_t quiet = ahead > kMaxQuietNs / std::max<uint64_t>(half_kernel, 1) ? kMaxQuietNs : ahead * half_kernel;
  return from + std::min(quiet, kMaxQuietNs);
}

uint64_t LaunchTracker::CompletionEstimate(StreamTrack& track, uint64_t called_ns, uint64_t returned_ns) {
  if (returned_ns - called_ns > kWaitedNs) return returned_ns;
  const uint64_t previous =
      std::max({track.queried_ns(), track.progress_ns(), track.busy_since_ns().load(std::memory_order_relaxed)});
  return previous < called_ns ? previous + (called_ns - previous) / 2 : called_ns;
}

// The kernel length is measured from completions: launches a fact completed ran one after
// another from when the track became busy, or from the previous fact.
uint32_t LaunchTracker::Advance(LaunchLane* lane, StreamTrack& track, uint64_t count, uint64_t completed_ns) {
  const uint64_t added = track.AdvanceDone(count);
  if (added == 0) return 0;
  track.DropStaleMarkers();  // their slots free for the launcher's next markers
  const uint64_t from = std::max(track.progress_ns(), track.busy_since_ns().load(std::memory_order_relaxed));
  if (from != 0 && completed_ns > from) {
    budget_.MeasureKernel((completed_ns - from) / added);
  }
  track.progress_ns() = std::max(completed_ns, track.progress_ns());
  // The lane's own thread needs no barrier against its own launches.
  const bool producer = lane != &shared_lane_ && lane == OwnLane();
  return lane->Remove(static_cast<uint32_t>(added), producer, untracked_.fence()) ? LaneWentIdle() : 0;
}

// A lane with nothing left in flight came off the count of busy lanes in Advance; what it has
// beyond one launch is published as its extra launches (what the end of a quantum looks at).
uint32_t LaunchTracker::PublishExtra(LaunchLane* lane) {
  const uint32_t inflight = lane->Inflight();
  const uint32_t extra = inflight > 1 ? std::min(inflight - 1, kMaxExtraPerLane) : 0;
  const uint32_t delta = (extra - lane->published_extra()) << broker::kInflightExtraShift;
  lane->published_extra() = extra;
  return delta;
}

uint32_t LaunchTracker::Poll(const Poller& poller, uint64_t now) {
  uint32_t delta = 0;
  uint64_t completed = 0;
  {
    MutexLock pause(&contexts_->pause_mutex());  // no context is destroyed under our queries
    const auto visit = [&](LaunchLane* lane) {
      MutexLock consumer(&lane->consumer_mutex());
      lane->ForEachBusyTrack([&](StreamTrack& track) {
        uint64_t completed_ns = 0;
        if (const uint64_t count = QueryTrack(track, poller, now, &completed_ns); count != 0) {
          delta += Advance(lane, track, count, completed_ns);
          completed = std::max(completed, completed_ns);
        }
      });
      delta += PublishExtra(lane);
    };
    if (poller.monitor) {
      ForEachLane(visit);
    } else {
      visit(poller.own);
    }
  }
  const uint32_t queued = RefreshQueued();
  if (AdjustInflight(delta)) WentIdle(completed != 0 ? completed : now);
  return queued;
}

// The process's queue as of now, whoever learnt of completions: a launcher over the budget is
// judged by it.
uint32_t LaunchTracker::RefreshQueued() {
  uint32_t queued = 0;
  ForEachLane([&](LaunchLane* lane) { queued += lane->Inflight(); });
  budget_.SetQueued(queued);
  return queued;
}

void LaunchTracker::TakeSnapshot(CUstream handle, CUcontext context, bool own_only, bool await, uint64_t called_ns,
                                 Snapshot* snapshot) {
  LaunchLane* own = OwnLane();
  if (own_only && !own) return;
  const auto visit = [&](LaunchLane* lane) {
    if (own_only && lane != own) return;
    MutexLock consumer(&lane->consumer_mutex());
    for (uint32_t i = 0; i < LaunchLane::kTracks && snapshot->count < Snapshot::kMax; ++i) {
      StreamTrack& t = lane->track(i);
      if (!t.bound() || t.Pending() == 0 || (handle && t.handle() != handle) || (context && t.context() != context))
        continue;
      snapshot->items[snapshot->count++] = {lane, static_cast<uint8_t>(i), t.Submitted(), t.context()};
      if (await && lane == own) {
        t.awaited_since_ns().store(called_ns, std::memory_order_relaxed);
        snapshot->awaits_own = true;
      }
    }
  };
  ForEachLane(visit);
}

void LaunchTracker::ApplySnapshot(const Snapshot& snapshot, bool completed, uint64_t called_ns, uint64_t returned_ns) {
  uint32_t delta = 0;
  uint64_t latest = 0;
  for (int i = 0; i < snapshot.count; ++i) {
    const Snapshot::Item& item = snapshot.items[i];
    StreamTrack& track = item.lane->track(item.track);
    if (snapshot.awaits_own) track.awaited_since_ns().store(0, std::memory_order_relaxed);
    if (!completed) continue;
    MutexLock consumer(&item.lane->consumer_mutex());
    const uint64_t completed_ns = CompletionEstimate(track, called_ns, returned_ns);
    delta += Advance(item.lane, track, item.submitted, completed_ns);
    delta += PublishExtra(item.lane);
    latest = std::max(latest, completed_ns);
  }
  if (completed && snapshot.count != 0) RefreshQueued();
  if (AdjustInflight(delta)) WentIdle(latest != 0 ? latest : returned_ns);
}

bool LaunchTracker::OwnTrack(CUstream handle, CUcontext context, Snapshot::Item* item) {
  LaunchLane* own = OwnLane();
  if (!own) return false;
  for (uint32_t i = 0; i < LaunchLane::kTracks; ++i) {
    StreamTrack& t = own->track(i);  // the thread's own lane: its bindings are its own writes
    if (!t.bound() || t.handle() != handle || (context && t.context() != context) || t.Pending() == 0) continue;
    *item = Snapshot::Item{own, static_cast<uint8_t>(i), t.Submitted(), t.context()};
    return true;
  }
  return false;
}

void LaunchTracker::ForgetStream(CUstream stream) {
  const uint64_t now = MonotonicNanos();
  uint32_t delta = 0;
  ForEachLane([&](LaunchLane* lane) {
    MutexLock consumer(&lane->consumer_mutex());
    lane->ForEachBusyTrack([&](StreamTrack& t) {
      if (t.handle() != stream) return;
      published_->inflight.fetch_or(broker::kUntrackedWork);  // first: the word stays busy
      delta += Advance(lane, t, t.Submitted(), now);
    });
    delta += PublishExtra(lane);
  });
  AdjustInflight(delta);  // never 0: the flag is set
}

// The launches of `context` queued on any lane are done (their work went with the context), and
// its marker events with it.
void LaunchTracker::ForgetContext(CUcontext context) {
  const uint64_t now = MonotonicNanos();
  uint32_t delta = 0;
  ForEachLane([&](LaunchLane* lane) {
    MutexLock consumer(&lane->consumer_mutex());
    for (uint32_t i = 0; i < LaunchLane::kTracks; ++i) {
      StreamTrack& t = lane->track(i);
      if (!t.bound() || (context && t.context() != context)) continue;
      t.ForEachMarkerSlot([](StreamTrack::Marker& m) { m.event = nullptr; });
      delta += Advance(lane, t, t.Submitted(), now);
      t.DropStaleMarkers();
    }
    delta += PublishExtra(lane);
  });
  if (AdjustInflight(delta)) WentIdle(now);
}

// A track only its launching thread can ask about (its per-thread default stream) with launches
// after its last marker, while that thread is elsewhere (not launching, not waiting for the
// grant — it marks its tails then): no poller can see them complete.
bool LaunchTracker::HasUnfollowableWork(uint64_t now) {
  if (!bounded_.load(std::memory_order_relaxed)) return false;
  bool quiet = false;
  ForEachLane([&](LaunchLane* lane) {
    MutexLock consumer(&lane->consumer_mutex());
    lane->ForEachBusyTrack([&](StreamTrack& t) {
      if (t.access() != StreamTrack::Access::kOwnerThread) return;
      const uint64_t submitted = t.Submitted();
      if (submitted != t.seen_submitted()) {
        t.seen_submitted() = submitted;
        t.seen_since_ns() = now;
        return;
      }
      t.DropStaleMarkers();
      if (!t.HasMarker() && now - t.seen_since_ns() >= kQuietOwnerTrackNs) quiet = true;
    });
  });
  return quiet;
}

// The monitor waits for all work of the gate's contexts: every launch counted before on their
// tracks is then complete.
void LaunchTracker::SynchronizeAndComplete(uint64_t now) {
  Snapshot before;
  ForEachLane([&](LaunchLane* lane) {
    MutexLock consumer(&lane->consumer_mutex());
    for (uint32_t i = 0; i < LaunchLane::kTracks && before.count < Snapshot::kMax; ++i) {
      StreamTrack& t = lane->track(i);
      if (t.bound() && t.Pending() != 0)
        before.items[before.count++] = {lane, static_cast<uint8_t>(i), t.Submitted(), t.context()};
    }
  });
  std::vector<CUcontext> synchronized;
  contexts_->SynchronizeGate(gate_, &synchronized);
  Snapshot done;
  for (int i = 0; i < before.count; ++i) {
    const CUcontext context = before.items[i].context;
    if (std::find(synchronized.begin(), synchronized.end(), context) != synchronized.end())
      done.items[done.count++] = before.items[i];
  }
  ApplySnapshot(done, true, now, MonotonicNanos());
}

}  // namespace gpuslice::shim
