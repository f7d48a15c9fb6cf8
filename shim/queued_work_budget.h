// How much work this process keeps queued on a GPU while other tenants share it (docs/scheduling.md,
// "The budget: bounded queued work"): the GPU's budget over the measured kernel length, so that a
// hand-over waits for what is running, not for a backlog; and how often a launching thread
// records a marker behind its launches, so that a launcher over the budget has an earlier launch
// to wait for. The kernel length is measured from completions (shim/completion_poll.cc).
#pragma once

#include <atomic>
#include <cstdint>

#include "broker/compute_gate.h"
#include "shim/queue_drain_prediction.h"

namespace gpuslice::shim {

class QueuedWorkBudget {
 public:
  // What a latency request waits for beyond the running kernels (docs/scheduling.md, the latency
  // class's contract).
  static constexpr uint64_t kBesideLatencyNs = 1'000'000;

  // The process's queue as of the last poll, or this thread's own (`own_inflight`), has reached
  // the budget. Only the thread's own count is exact between polls: threads launching at once may
  // together queue past the budget until the next poll (a fraction of a millisecond while others
  // share the GPU).
  bool Reached(uint32_t own_inflight) const {
    const uint32_t budget = kernels_.load(std::memory_order_relaxed);
    return queued_.load(std::memory_order_relaxed) >= budget || own_inflight >= budget;
  }
  // The budget for `gate`'s GPU beside `neighbours`, from the kernel length measured so far (the
  // monitor, at every step).
  void Update(const broker::ComputeGate& gate, const broker::ComputeGate::Neighbours& neighbours);
  // The process's launches queued on every lane, as a poll counted them.
  void SetQueued(uint32_t queued) { queued_.store(queued, std::memory_order_relaxed); }
  // Launches a fact completed ran one after another, `per_launch_ns` each: a moving average.
  void MeasureKernel(uint64_t per_launch_ns) {
    const uint64_t ewma = kernel_ns_.load(std::memory_order_relaxed);
    kernel_ns_.store((ewma * 3 + per_launch_ns) / 4, std::memory_order_relaxed);
  }

  // Beside a latency tenant the budget is also counted in time (shim/queue_drain_prediction.h).
  // The prediction is the GPU's, shared by its processes (GpuEntry::queue_drain_at_ns).
  void BindDrainPrediction(std::atomic<uint64_t>* shared) { drain_.Bind(shared); }
  bool AheadTooFar(uint64_t now) const { return drain_.TooFar(now); }
  uint64_t AheadWithinAt(uint64_t now) const { return drain_.WithinAt(now); }
  bool counts_ahead() const { return drain_.counted(); }
  // A launch at `now` takes its place in the predicted queue (false: too far ahead, wait).
  bool ClaimAhead(uint64_t now) { return drain_.Claim(now, kernel_ns_.load(std::memory_order_relaxed)); }
  void UnclaimAhead() { drain_.Unclaim(); }
  void NoteDrained(uint64_t at) { drain_.Drained(at); }

  uint32_t kernels() const { return kernels_.load(std::memory_order_relaxed); }
  // Launches between two markers of a track.
  uint32_t marker_every() const { return marker_every_.load(std::memory_order_relaxed); }
  // The measured kernel length.
  uint64_t kernel_ns() const { return kernel_ns_.load(std::memory_order_relaxed); }

 private:
  static constexpr uint32_t kMinKernels = 2;
  static constexpr uint32_t kMaxKernels = 1024;

  std::atomic<uint32_t> kernels_{2};
  std::atomic<uint32_t> marker_every_{1};
  std::atomic<uint64_t> kernel_ns_{1'000'000};
  std::atomic<uint32_t> queued_{0};
  QueueDrainPrediction drain_;
};

}  // namespace gpuslice::shim
