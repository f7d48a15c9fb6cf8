// One stream a launching thread launches into, and how far its launches are known to have
// completed (shim/launch_lane.h holds a thread's tracks; docs/scheduling.md, "Tracking launches
// by completion").
//
// Launches are counted, not followed one by one: `submitted` counts the thread's launches into
// the stream that the driver accepted, `done` how many of them are known complete. Launches into
// one stream complete in order, so a single fact — "the stream was idle", "the marker recorded
// after launch n completed", "the application's synchronisation of the stream returned" — moves
// `done` up to a count read before it was learnt. Nothing is asked of the driver per launch:
// facts come from the application's own synchronisations (free), from queries of the stream or
// of a marker by a poller (a monitor thread or a blocked launcher), and from markers — events the
// launching thread records behind a launch at a bounded rate (shim/launch_markers.cc).
//
// Both counters only grow, also across rebinding to another stream, so a fact learnt about an
// earlier binding can never count a later launch as done.
#pragma once

#include <atomic>
#include <cstdint>

#include "shim/driver_api.h"

namespace gpuslice::shim {

class StreamTrack {
 public:
  // Markers a track may have recorded and not yet seen complete.
  static constexpr uint32_t kMarkers = 4;

  struct Marker {
    CUevent event = nullptr;  // kept in the slot for the next marker (same context)
    uint64_t covers = 0;      // `submitted` when it was recorded
  };

  // Who can ask the driver about the stream: anyone (a stream the application created), a thread
  // with the context current (the context's legacy default stream), or only the launching thread
  // itself (its per-thread default stream).
  enum class Access : uint8_t { kAnyThread, kLegacy, kOwnerThread };

  // What the track is bound to: the stream handle as the driver is asked about it (the
  // application's stream, CU_STREAM_LEGACY or CU_STREAM_PER_THREAD) and its context. Written by
  // the launching thread with the lane's consumer mutex held, read by others under it.
  CUstream handle() const { return handle_; }
  CUcontext context() const { return context_; }
  bool bound() const { return bound_; }
  Access access() const {
    if (handle_ == CU_STREAM_PER_THREAD) return Access::kOwnerThread;
    return handle_ == CU_STREAM_LEGACY ? Access::kLegacy : Access::kAnyThread;
  }
  bool Matches(CUstream handle, CUcontext context) const { return bound_ && handle_ == handle && context_ == context; }
  void Bind(CUstream handle, CUcontext context) {
    handle_ = handle;
    context_ = context;
    bound_ = true;
  }

  // ---- Counts.
  uint64_t Submitted() const { return submitted_.load(std::memory_order_acquire); }
  uint64_t Done() const { return done_.load(std::memory_order_acquire); }
  uint64_t Pending() const { return Submitted() - Done(); }
  // The launching thread: one more launch accepted by the driver.
  void CountSubmitted() { submitted_.store(submitted_.load(std::memory_order_relaxed) + 1, std::memory_order_release); }
  // A consumer (its lane's consumer mutex held): launches up to `count` are complete. Returns how
  // many that adds.
  uint64_t AdvanceDone(uint64_t count) {
    const uint64_t done = done_.load(std::memory_order_relaxed);
    if (count <= done) return 0;
    done_.store(count, std::memory_order_release);
    return count - done;
  }

  // ---- The launching thread's side.
  std::atomic<uint64_t>& busy_since_ns() { return busy_since_ns_; }  // a launch found it idle then
  uint64_t& marked() { return marked_; }  // `submitted` at the newest marker, or when it went busy
  bool MarkerSlotFree() const {
    return marker_head_.load(std::memory_order_relaxed) - marker_tail_.load(std::memory_order_acquire) < kMarkers;
  }
  Marker& NextMarker() { return markers_[marker_head_.load(std::memory_order_relaxed) % kMarkers]; }
  void PublishMarker() {
    marker_head_.store(marker_head_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  }

  // ---- A consumer's side (the lane's consumer mutex held).
  bool HasMarker() const {
    return marker_tail_.load(std::memory_order_relaxed) != marker_head_.load(std::memory_order_acquire);
  }
  Marker& OldestMarker() { return markers_[marker_tail_.load(std::memory_order_relaxed) % kMarkers]; }
  void PopMarker() { marker_tail_.store(marker_tail_.load(std::memory_order_relaxed) + 1, std::memory_order_release); }
  // Markers that cover nothing not already known complete are dropped.
  void DropStaleMarkers() {
    while (HasMarker() && OldestMarker().covers <= Done()) PopMarker();
  }
  template <typename Visit>
  void ForEachMarkerSlot(Visit visit) {
    for (Marker& m : markers_) visit(m);
  }
  uint64_t& progress_ns() { return progress_ns_; }  // when `done` last moved
  uint64_t& queried_ns() { return queried_ns_; }    // when a poller last asked the driver
  // The monitor's view of a track only its thread can follow: `submitted` as last seen, and
  // since when it has not moved.
  uint64_t& seen_submitted() { return seen_submitted_; }
  uint64_t& seen_since_ns() { return seen_since_ns_; }

  // The launching thread is inside a synchronisation that covers the track (its own or one of
  // the application's), since this time (0: it is not): pollers leave the track to it.
  std::atomic<uint64_t>& awaited_since_ns() { return awaited_since_ns_; }

 private:
  // The launching thread's line.
  alignas(64) std::atomic<uint64_t> submitted_{0};
  std::atomic<uint64_t> busy_since_ns_{0};
  std::atomic<uint32_t> marker_head_{0};
  uint64_t marked_ = 0;
  CUstream handle_ = nullptr;
  CUcontext context_ = nullptr;
  bool bound_ = false;
  std::atomic<uint64_t> awaited_since_ns_{0};
  // The consumers' line.
  alignas(64) std::atomic<uint64_t> done_{0};
  std::atomic<uint32_t> marker_tail_{0};
  uint64_t progress_ns_ = 0;
  uint64_t queried_ns_ = 0;
  uint64_t seen_submitted_ = 0;
  uint64_t seen_since_ns_ = 0;
  Marker markers_[kMarkers];
};

}  // namespace gpuslice::shim
