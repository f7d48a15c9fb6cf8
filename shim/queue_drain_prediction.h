// When the queued work on a GPU is predicted to drain: the queued-work budget counted in time
// rather than in kernels, beside a latency-class tenant (docs/scheduling.md, the latency class's
// contract, point 3). Counted in kernels, a process keeps one kernel queued behind its running
// one so that the device does not idle at each completion; with kernels longer than the 1 ms of
// queue a request is promised, that kernel lies whole behind the running one. Counted in time,
// the next kernel goes in only once the running one is predicted to have at most 1 ms left: a
// request then waits for at most that and one kernel, and the device still finds the next kernel
// queued when the running one ends.
//
// The prediction is the GPU's, not the process's (GpuEntry::queue_drain_at_ns): every process
// beside the latency tenant moves the same one on. Counted per process, each of three processes
// keeps a kernel running, the hardware turns between their contexts and the request's, and a
// request waits for three kernels instead of one.
//
// Each launch that gets in claims its place: it ends one measured kernel length after the later of
// its launch and the predicted end of the work before it — one compare-and-swap, so processes
// woken at the same predicted moment take turns rather than all going in. A completion that left
// the process idle cuts the prediction back when the process's own launch was the last to move
// it. No driver call: a launcher held by it sleeps until the predicted moment. It is a prediction
// in CLOCK_MONOTONIC: a claim that never ran (a process killed) is simply in the past a kernel
// later.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>

namespace gpuslice::shim {

class QueueDrainPrediction {
 public:
  // The prediction shared by the GPU's processes; until bound (unit tests), the process's own.
  void Bind(std::atomic<uint64_t>* shared) { drain_at_ns_ = shared; }

  // How far ahead of now the queue may drain for a launch to go in; 0: not counted in time.
  void SetAhead(uint64_t ahead_ns) { ahead_ns_.store(ahead_ns, std::memory_order_relaxed); }
  bool counted() const { return ahead_ns_.load(std::memory_order_relaxed) != 0; }

  // A launch now would queue work to drain more than `ahead` past now.
  bool TooFar(uint64_t now) const {
    return Beyond(drain_at_ns_->load(std::memory_order_relaxed), now, ahead_ns_.load(std::memory_order_relaxed));
  }
  // When a launch turned away by TooFar may go in (not before `now`).
  uint64_t WithinAt(uint64_t now) const {
    const uint64_t drain = drain_at_ns_->load(std::memory_order_relaxed);
    const uint64_t ahead = ahead_ns_.load(std::memory_order_relaxed);
    return drain > now + ahead ? drain - ahead : now;
  }
  // A launch at `now` of a kernel of `kernel_ns`: true, its place claimed, unless the queue is
  // already predicted to drain more than `ahead` past now (false, nothing claimed).
  bool Claim(uint64_t now, uint64_t kernel_ns) {
    const uint64_t ahead = ahead_ns_.load(std::memory_order_relaxed);
    uint64_t drain = drain_at_ns_->load(std::memory_order_relaxed);
    uint64_t moved;
    do {
      if (Beyond(drain, now, ahead)) return false;
      moved = std::max(drain, now) + kernel_ns;
    } while (!drain_at_ns_->compare_exchange_weak(drain, moved, std::memory_order_relaxed));
    claimed_from_ns_.store(drain, std::memory_order_relaxed);
    claimed_ns_.store(moved, std::memory_order_relaxed);
    return true;
  }
  // The launch of the last Claim did not go in (the grant closed meanwhile): its place is given
  // back, unless another launch has claimed one behind it.
  void Unclaim() {
    uint64_t mine = claimed_ns_.load(std::memory_order_relaxed);
    drain_at_ns_->compare_exchange_strong(mine, claimed_from_ns_.load(std::memory_order_relaxed),
                                          std::memory_order_relaxed);
  }
  // Every launch of the process completed, the last at `at`: the prediction is cut back to `at`
  // when this process's last claim is still the last (another process's claim behind it keeps
  // its place until that process's own work completes).
  void Drained(uint64_t at) {
    uint64_t mine = claimed_ns_.load(std::memory_order_relaxed);
    if (mine > at) drain_at_ns_->compare_exchange_strong(mine, at, std::memory_order_relaxed);
  }

 private:
  static bool Beyond(uint64_t drain, uint64_t now, uint64_t ahead) {
    // sabotage-point: queue-not-counted-in-time
    return ahead != 0 && drain > now + ahead;
  }

  std::atomic<uint64_t> ahead_ns_{0};
  std::atomic<uint64_t> own_drain_at_ns_{0};
  std::atomic<uint64_t>* drain_at_ns_ = &own_drain_at_ns_;
  // What this process's last claim moved the prediction from and to. Threads of one process
  // claiming at once overwrite each other's: Unclaim or Drained then leaves the prediction late
  // by a kernel, which passes as time does.
  std::atomic<uint64_t> claimed_from_ns_{0};
  std::atomic<uint64_t> claimed_ns_{0};
};

}  // namespace gpuslice::shim
