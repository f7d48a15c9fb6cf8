// This process's busy periods on one GPU, published for the grant policy (ProcessGpuState,
// broker/grant_policy.h): when the current one began, the busy time of those that ended, when the
// last one ended, and the idle grace — how long a gap between two launches may last before the
// process counts as idle — learnt from the process's own launch gaps, so that a synchronous
// launcher does not look idle between its kernels.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>

#include "broker/segment_layout.h"

namespace gpuslice::shim {

class BusyPeriods {
 public:
  explicit BusyPeriods(broker::ProcessGpuState* published) : published_(published) {}

  // A busy period begins at `now` (a launch from idle, or work of unknown extent flagged).
  void Begin(uint64_t now) { published_->busy_since_ns.store(now); }
  // How long after the last one ended the launch that began the period at `now` came. Nullopt
  // when it tells nothing of the program's own gaps (it waited first, or none ended before).
  std::optional<uint64_t> GapBefore(uint64_t now, bool waited) const;
  // The idle grace is learnt from such a gap (one of kMaxGraceNs or more was idleness).
  void LearnGap(uint64_t gap);
  // Nothing in flight any more since `end`.
  void End(uint64_t end);

 private:
  broker::ProcessGpuState* published_;
  std::atomic<uint64_t> gap_ns_{0};  // EWMA of completion-to-next-launch gaps
};

}  // namespace gpuslice::shim
