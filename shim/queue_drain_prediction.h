// When a process's queued work on a GPU is predicted to drain: the queued-work budget counted in
// time rather than in kernels, beside a latency-class tenant (docs/scheduling.md, the latency
// class's contract, point 3). Counted in kernels, a process keeps one kernel queued behind its
// running one so that the device does not idle at each completion; with kernels longer than the
// 1 ms of queue a request is promised, that kernel lies whole behind the running one. Counted in
// time, the next kernel goes in only once the running one is predicted to have at most the
// process's share of the 1 ms left: a request then waits for at most that and one kernel, and
// the device still finds the next kernel queued when the running one ends.
//
// The prediction: each launch that got in ends one measured kernel length after the later of its
// launch and the predicted end of the one before; a completion that left the process idle cuts it
// back. No driver call: a launcher held by it sleeps until the predicted moment.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>

namespace gpuslice::shim {

class QueueDrainPrediction {
 public:
  // How far ahead of now the queue may drain for a launch to go in; 0: not counted in time.
  void SetAhead(uint64_t ahead_ns) { ahead_ns_.store(ahead_ns, std::memory_order_relaxed); }
  bool counted() const { return ahead_ns_.load(std::memory_order_relaxed) != 0; }

  // A launch now would queue work to drain more than `ahead` past now.
  bool TooFar(uint64_t now) const {
    const uint64_t ahead = ahead_ns_.load(std::memory_order_relaxed);
    // sabotage-point: queue-not-counted-in-time
    return ahead != 0 && drain_at_ns_.load(std::memory_order_relaxed) > now + ahead;
  }
  // When a launch turned away by TooFar may go in (not before `now`).
  uint64_t WithinAt(uint64_t now) const {
    const uint64_t drain = drain_at_ns_.load(std::memory_order_relaxed);
    const uint64_t ahead = ahead_ns_.load(std::memory_order_relaxed);
    return drain > now + ahead ? drain - ahead : now;
  }
  // A launch got in at `now`; the process's kernels run `kernel_ns` each.
  void Launched(uint64_t now, uint64_t kernel_ns) {
    const uint64_t drain = drain_at_ns_.load(std::memory_order_relaxed);
    drain_at_ns_.store(std::max(drain, now) + kernel_ns, std::memory_order_relaxed);
  }
  // Every launch of the process completed, the last at `at`.
  void Drained(uint64_t at) {
    if (drain_at_ns_.load(std::memory_order_relaxed) > at) drain_at_ns_.store(at, std::memory_order_relaxed);
  }

 private:
  std::atomic<uint64_t> ahead_ns_{0};
  // Threads of one process launching at once race on it (relaxed loads and stores): a lost
  // update predicts an earlier drain, as the kernel count lets such threads queue past the
  // budget until the next poll.
  std::atomic<uint64_t> drain_at_ns_{0};
};

}  // namespace gpuslice::shim
