// One launching thread's tracked launches on one GPU: how many it has in flight, and a track per
// stream it launches into (shim/stream_track.h) telling how far they are known complete.
//
// A lane has one producer — its thread, or for the shared lane of threads past the per-thread
// ones, whoever holds that lane's producer mutex — and consumers that hold the lane's consumer
// mutex: the monitor, a blocked launcher polling its own lane, an application synchronisation
// that completed the lane's work. The launch path writes only lines of its own thread: the count
// (one uncontended locked addition) and its track's `submitted`. A process-wide queue written by
// every launch made each launch from two threads cost five times one launch alone.
#pragma once

#include <atomic>
#include <cstdint>

#include "common/mutex.h"
#include "common/mutex_lock.h"
#include "shim/driver_api.h"
#include "shim/real_driver.h"
#include "shim/stream_track.h"

namespace gpuslice::shim {

class LaunchLane {
 public:
  // Streams one thread may have launches in flight on at once; a launch into yet another stream
  // while every track has work pending counts as work of unknown extent (the monitor then
  // confirms it by synchronising the context).
  static constexpr uint32_t kTracks = 8;

  LaunchLane() = default;
  LaunchLane(const LaunchLane&) = delete;
  LaunchLane& operator=(const LaunchLane&) = delete;

  // Launches entered and not yet counted down. Add returns the count before (0: the lane was
  // idle); Remove the count after. The producer adds, anyone counts down.
  uint32_t Add() { return inflight_.fetch_add(1, std::memory_order_acq_rel); }
  uint32_t Remove(uint32_t launches) { return inflight_.fetch_sub(launches, std::memory_order_acq_rel) - launches; }
  uint32_t Inflight() const { return inflight_.load(std::memory_order_acquire); }

  // ---- The producer's side.
  // The track bound to (handle, context), binding an idle or unused one when none is: nullptr
  // when every track has launches pending on other streams.
  StreamTrack* TrackFor(CUstream handle, CUcontext context) {
    StreamTrack& last = tracks_[last_track_];
    if (last.Matches(handle, context)) [[likely]]
      return &last;
    return FindOrBind(handle, context);
  }
  // When the lane last launched (for the monitor: a thread gone quiet with launches it cannot
  // follow).
  std::atomic<uint64_t>& last_launch_ns() { return last_launch_ns_; }

  // ---- Everyone's side.
  StreamTrack& track(uint32_t i) { return tracks_[i]; }
  template <typename Visit>
  void ForEachBusyTrack(Visit visit) {
    for (StreamTrack& t : tracks_) {
      if (t.bound() && t.Pending() != 0) visit(t);
    }
  }
  // The consumers' mutex; the producer takes it only to rebind a track.
  Mutex& consumer_mutex() { return consumer_mutex_; }
  // What the lane adds to the process's published extra launches (ProcessGpuState::inflight).
  uint32_t& published_extra() { return published_extra_; }

 private:
  StreamTrack* FindOrBind(CUstream handle, CUcontext context) {
    uint32_t free = kTracks;
    for (uint32_t i = 0; i < kTracks; ++i) {
      StreamTrack& t = tracks_[i];
      if (t.Matches(handle, context)) {
        last_track_ = i;
        return &t;
      }
      if (free == kTracks && (!t.bound() || t.Pending() == 0)) free = i;
    }
    if (free == kTracks) return nullptr;
    MutexLock lock(&consumer_mutex_);
    StreamTrack& t = tracks_[free];
    if (t.Pending() != 0) return nullptr;  // not reached: only this thread submits into it
    t.DropStaleMarkers();
    if (t.bound() && t.context() != context) {
      // Its kept marker events belong to the old context: not reusable in the new one.
      const RealDriver* real = Real();
      t.ForEachMarkerSlot([&](StreamTrack::Marker& m) {
        if (m.event && real->cuEventDestroy_v2) real->cuEventDestroy_v2(m.event);
        m.event = nullptr;
      });
    }
    t.Bind(handle, context);
    last_track_ = free;
    return &t;
  }

  alignas(64) std::atomic<uint32_t> inflight_{0};
  uint32_t last_track_ = 0;
  std::atomic<uint64_t> last_launch_ns_{0};
  alignas(64) Mutex consumer_mutex_;
  uint32_t published_extra_ = 0;
  StreamTrack tracks_[kTracks];
};

}  // namespace gpuslice::shim
