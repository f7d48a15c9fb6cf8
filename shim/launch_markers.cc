// Markers: events a launching thread records behind its launches (shim/stream_track.h), so that
// a launcher over the queued-work budget has an earlier launch to wait for, and so that the
// monitor can follow launches into a stream only their thread can ask about. When they are
// recorded is LaunchTracker::CountSubmitted's and the budget's (shim/queued_work_budget.h).
#include "common/clock.h"
#include "common/mutex_lock.h"
#include "shim/current_context.h"
#include "shim/launch_tracker.h"
#include "shim/real_driver.h"

namespace gpuslice::shim {

// Events are created in the current context, which must be the stream's; a stream of another
// context than the current one goes without markers (its pollers ask the stream itself).
void LaunchTracker::RecordMarker(StreamTrack* track) {
  if (!events_usable_ || !track->MarkerSlotFree()) return;
  const RealDriver* real = Real();
  if (CurrentContext::Get(real) != track->context()) return;
  StreamTrack::Marker& marker = track->NextMarker();
  if (!marker.event &&
      real->cuEventCreate(&marker.event, CU_EVENT_DISABLE_TIMING | CU_EVENT_BLOCKING_SYNC) != CUDA_SUCCESS) {
    marker.event = nullptr;
    return;
  }
  if (real->cuEventRecord(marker.event, track->handle()) != CUDA_SUCCESS) return;  // the slot keeps its event
  marker.covers = track->Submitted();
  track->marked() = marker.covers;
  track->PublishMarker();
}

// Sleeps in the driver until the lane's oldest marker completes — the event is created with
// blocking sync, so the driver wakes the thread at completion rather than it spinning. The track
// is awaited meanwhile: the monitor leaves it to this thread. False: no marker to wait for.
bool LaunchTracker::WaitForOldest(LaunchLane* lane) {
  StreamTrack* waited = nullptr;
  StreamTrack::Marker marker;
  {
    MutexLock consumer(&lane->consumer_mutex());
    lane->ForEachBusyTrack([&](StreamTrack& t) {
      t.DropStaleMarkers();
      if (t.HasMarker() && t.OldestMarker().event && (!waited || t.Pending() > waited->Pending())) {
        waited = &t;
        marker = t.OldestMarker();
      }
    });
  }
  if (!waited) return false;
  const uint64_t called = MonotonicNanos();
  waited->awaited_since_ns().store(called);
  const CUresult rc = Real()->cuEventSynchronize(marker.event);
  waited->awaited_since_ns().store(0);
  if (rc != CUDA_SUCCESS) return true;  // its context is gone: ForgetContext completes its launches
  const uint64_t returned = MonotonicNanos();
  uint32_t delta = 0;
  uint64_t completed = returned;
  {
    MutexLock consumer(&lane->consumer_mutex());
    completed = CompletionEstimate(*waited, called, returned);
    delta += Advance(lane, *waited, marker.covers, completed);
    delta += PublishExtra(lane);
  }
  RefreshQueued();
  if (AdjustInflight(delta)) WentIdle(completed);
  return true;
}

void LaunchTracker::MarkOwnTails(LaunchLane* lane) {
  if (lane == &shared_lane_) return;  // its tracks' threads are not known
  lane->ForEachBusyTrack([&](StreamTrack& t) {
    if (t.access() == StreamTrack::Access::kOwnerThread && t.marked() < t.Submitted()) RecordMarker(&t);
  });
}

}  // namespace gpuslice::shim
