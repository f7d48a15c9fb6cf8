// One launching thread's tracked launches on one GPU: how many it has in flight, and the events
// recorded behind them, oldest first, for the poller to query (shim/launch_tracker.h).
//
// A lane has one producer — its thread, or for the shared lane of threads past the per-thread
// ones, whoever holds that lane's producer mutex — and one consumer at a time, a poller holding
// the lane's consumer mutex (the monitor, a blocked launcher, or the lane's own thread when every
// slot is taken). The launch path therefore writes only lines of its own thread: a count
// (one uncontended locked addition), a slot, and the ring's head. A process-wide queue and count
// written by every launch made each launch from two threads cost five times one launch alone.
//
// Slots keep their events when the poller is done with them: the next launch into the slot
// records the same event again when it is of the same context (the common case), so events are
// created only while the lane's queue first grows.
#pragma once

#include <atomic>
#include <cstdint>
#include <utility>
#include <vector>

#include "common/mutex.h"
#include "shim/driver_api.h"

namespace gpuslice::shim {

class LaunchLane {
 public:
  // Launches one thread may have queued and not yet seen complete by the poller; past it, the
  // launcher polls itself and waits for its oldest, as the driver's own queue makes it wait.
  // 256 slots (10 KiB) stay in the launching core's L1 cache beside the rest of the path; 512
  // made the slot's first load a miss on a saturating launcher. On a shared GPU the budget
  // (docs/scheduling.md) stops a process sooner unless its kernels are shorter than about 8 µs
  // (the default 2 ms over 256); such a thread polls its own lane every 256 launches.
  static constexpr uint32_t kCapacity = 256;

  struct Slot {
    CUevent event = nullptr;      // kept for the next launch into the slot
    CUcontext context = nullptr;  // the context `event` belongs to
    CUstream stream = nullptr;    // launched into: launches into one stream complete in order
    uint64_t launched_ns = 0;     // when it was launched into an idle lane; 0: queued behind another
    bool per_thread = false;      // a _ptsz launch (stream 0 is the thread's own)
    bool gone = false;            // its context was destroyed: the launch counts as completed

    bool SameStream(const Slot& other) const {
      return stream == other.stream && context == other.context && per_thread == other.per_thread;
    }
  };

  // Which lane is the shared one (threads past the per-thread lanes, its producer side under a
  // mutex) is the tracker's to know: it tells it by address (LaunchTracker::shared_lane_).
  LaunchLane() = default;
  LaunchLane(const LaunchLane&) = delete;
  LaunchLane& operator=(const LaunchLane&) = delete;

  // Launches entered and not yet counted down. Add returns the count before (0: the lane was
  // idle); Remove the count after. The producer adds, anyone counts down.
  uint32_t Add() { return inflight_.fetch_add(1, std::memory_order_acq_rel); }
  uint32_t Remove(uint32_t launches) { return inflight_.fetch_sub(launches, std::memory_order_acq_rel) - launches; }
  uint32_t Inflight() const { return inflight_.load(std::memory_order_acquire); }

  // ---- The producer's side.
  // Every slot holds a launch the poller has not taken off.
  bool Full() {
    const uint64_t head = head_.load(std::memory_order_relaxed);
    if (head - cached_tail_ < kCapacity) return false;
    cached_tail_ = tail_.load(std::memory_order_acquire);
    return head - cached_tail_ >= kCapacity;
  }
  // The slot the next launch goes into (call when not Full).
  Slot& Next() { return slots_[head_.load(std::memory_order_relaxed) % kCapacity]; }
  // The slot Next gave is filled: the poller may take it. A launch into another stream than the
  // previous one starts a new run (RunStart).
  void Publish() {
    const uint64_t head = head_.load(std::memory_order_relaxed);
    if (head == 0 || !slots_[head % kCapacity].SameStream(slots_[(head - 1) % kCapacity]))
      run_start_.store(head, std::memory_order_relaxed);
    head_.store(head + 1, std::memory_order_release);
  }
  // Launches the poller has not taken off yet (also readable by the poller).
  uint32_t Queued() const {
    return static_cast<uint32_t>(head_.load(std::memory_order_acquire) - tail_.load(std::memory_order_acquire));
  }
  // Events of contexts other than the current one, taken out of slots a launch of another
  // context needed; used again when the thread launches in their context.
  std::vector<std::pair<CUcontext, CUevent>>& spares() { return spares_; }
  // The tracker's count of destroyed contexts the lane's unused events were last checked against.
  uint64_t& checked_epoch() { return checked_epoch_; }
  // Calls `visit` on every slot not holding a queued launch (for the producer, or the consumer
  // while the producer is kept out).
  template <typename Visit>
  void ForEachFreeSlot(Visit visit) {
    const uint64_t head = head_.load(std::memory_order_acquire);
    const uint64_t tail = tail_.load(std::memory_order_acquire);
    for (uint64_t i = head; i < tail + kCapacity; ++i) visit(slots_[i % kCapacity]);
  }

  // ---- The consumer's side (one at a time).
  Mutex& consumer_mutex() { return consumer_mutex_; }
  uint64_t ConsumerHead() const { return head_.load(std::memory_order_acquire); }
  // Where the run of launches into one stream that ends at the head began (read after
  // ConsumerHead: it only grows, so a run that began at or before an index still covers it up
  // to the head read).
  uint64_t RunStart() const { return run_start_.load(std::memory_order_relaxed); }
  uint64_t ConsumerTail() const { return tail_.load(std::memory_order_relaxed); }
  Slot& At(uint64_t index) { return slots_[index % kCapacity]; }
  // Slots before `tail` are taken off: the producer may fill them again.
  void Release(uint64_t tail) { tail_.store(tail, std::memory_order_release); }
  // What the lane adds to the process's published extra launches (ProcessGpuState::inflight).
  uint32_t& published_extra() { return published_extra_; }
  // When the poller last saw one of the lane's launches complete (the next one started then).
  uint64_t& last_completion_ns() { return last_completion_ns_; }

 private:
  // The producer's line (the count is also written by the poller, once per poll that finds
  // completions).
  alignas(64) std::atomic<uint32_t> inflight_{0};
  std::atomic<uint64_t> head_{0};
  std::atomic<uint64_t> run_start_{0};
  uint64_t cached_tail_ = 0;
  uint64_t checked_epoch_ = 0;
  std::vector<std::pair<CUcontext, CUevent>> spares_;
  // The consumer's line.
  alignas(64) std::atomic<uint64_t> tail_{0};
  Mutex consumer_mutex_;
  uint32_t published_extra_ = 0;
  uint64_t last_completion_ns_ = 0;
  Slot slots_[kCapacity];
};

}  // namespace gpuslice::shim
