// One launching thread's tracked launches on one GPU: how many it has in flight, and a track per
// stream it launches into (shim/stream_track.h) telling how far they are known complete.
//
// A lane has one producer — its thread, or for the shared lane of threads past the per-thread
// ones, whoever holds that lane's producer mutex — and consumers that hold the lane's consumer
// mutex: the monitor, a blocked launcher polling its own lane, an application synchronisation
// that completed the lane's work. The launch path writes only lines of its own thread, with plain
// stores: its count of launches entered and its track's `submitted`. (A process-wide queue written
// by every launch made each launch from two threads cost five times one launch alone; a locked
// addition to a count the consumers also write cost a third of the launch path.)
//
// The lane is counted once in its process's published in-flight count while it has launches in
// flight. Whether a launch found the lane idle, or a completion left it idle, is a race between
// the producer's count and the consumers' count, settled with an asymmetric Dekker handshake
// (shim/asymmetric_fence.h): the producer stores, fences lightly and reads the consumers' count;
// a consumer that would find the lane idle fences heavily and reads again. Both may still see
// "idle" at the same count (the consumer then ends the busy period the producer continues); the
// lane's state word, which says at which count the lane was last found idle or taken busy, lets
// exactly one of them move the published count.
#pragma once

#include <atomic>
#include <cstdint>

#include "common/mutex.h"
#include "common/mutex_lock.h"
#include "shim/asymmetric_fence.h"
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

  // What a launch's entry found.
  struct Entered {
    bool found_idle = false;  // nothing of the lane was in flight before it
    bool made_busy = false;   // ... and it took the lane busy: count the lane in the published count
  };

  // The producer (the lane's thread, or the shared lane's producer mutex held): one launch more.
  Entered Add(const AsymmetricFence& fence) {
    const uint64_t before = entered_.load(std::memory_order_relaxed);
    entered_.store(before + 1, std::memory_order_relaxed);
    fence.Light();
    const uint64_t removed = removed_.load(std::memory_order_acquire);
    if (before != removed) return {};
    return {true, MarkBusy(removed)};
  }
  // Anyone: `launches` complete, or taken back by the producer. True when that left the lane idle
  // and took it off the published count (the caller subtracts it). `producer`: the caller is the
  // lane's producer, so no launch can enter meanwhile and no heavy fence is needed.
  bool Remove(uint32_t launches, bool producer, const AsymmetricFence& fence) {
    const uint64_t removed = removed_.fetch_add(launches, std::memory_order_acq_rel) + launches;
    // A count above `removed` is final (`entered` only grows); an equal one may miss a launch
    // entering now, which the barrier makes visible.
    if (entered_.load(std::memory_order_acquire) != removed) return false;
    if (!producer) {
      fence.Heavy();
      if (entered_.load(std::memory_order_acquire) != removed) return false;
    }
    return MarkIdle(removed);
  }
  uint32_t Inflight() const {
    const uint64_t removed = removed_.load(std::memory_order_acquire);
    const uint64_t entered = entered_.load(std::memory_order_acquire);
    return entered > removed ? static_cast<uint32_t>(entered - removed) : 0;
  }

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

  // The state word: the `removed` count at which the lane was last found idle or taken busy, and
  // whether it is busy (the low bit). A producer that found it idle at count n takes it busy at n;
  // a consumer that found it idle at n marks it idle at n only if no producer took it busy at n.
  static constexpr uint64_t kBusy = 1;
  bool MarkBusy(uint64_t removed) {
    uint64_t state = state_.load(std::memory_order_acquire);
    while (!state_.compare_exchange_weak(state, (removed << 1) | kBusy, std::memory_order_acq_rel)) {
    }
    return (state & kBusy) == 0;
  }
  bool MarkIdle(uint64_t removed) {
    uint64_t state = state_.load(std::memory_order_acquire);
    // sabotage-point: lane-idle-state-ignored
    while ((state & kBusy) != 0 && (state >> 1) < removed) {
      if (state_.compare_exchange_weak(state, removed << 1, std::memory_order_acq_rel)) return true;
    }
    return false;  // a launch entering at this count took the lane over
  }

  // The producer's line.
  alignas(64) std::atomic<uint64_t> entered_{0};
  uint32_t last_track_ = 0;
  std::atomic<uint64_t> last_launch_ns_{0};
  // The consumers' line.
  alignas(64) std::atomic<uint64_t> removed_{0};
  std::atomic<uint64_t> state_{0};  // idle at 0
  Mutex consumer_mutex_;
  uint32_t published_extra_ = 0;
  StreamTrack tracks_[kTracks];
};

}  // namespace gpuslice::shim
