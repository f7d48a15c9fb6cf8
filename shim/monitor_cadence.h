// How long a process's monitor thread may sleep after its step on one GPU (LaunchTracker::
// MonitorStep, run by shim/compute_monitor.cc). The monitor is how the process's side of the
// scheduler moves when no launch does: it polls completions, renews the heartbeat and the latency
// priority, and makes grant decisions. It steps often where something waits for it, and rarely
// where nothing does: every step is host time taken from the application.
#pragma once

#include <algorithm>
#include <cstdint>

namespace gpuslice::shim {

// hand_over_waits: the tenant holds the GPU and its gate is closing, or others wait for it: the
// hand-over waits for this process's drain to be seen. priority_held: the latency priority is to
// be renewed and its work charged. others_share: another tenant has the GPU open, so completions
// bound the queued work. work_left: launches of this process are in flight.
// until_grace_ends_ns: how long until the latency priority held with nothing in flight outlasts
// its grace (LatencyPriority::UntilGraceEndsNs; UINT64_MAX when none runs): the step then ends it,
// not the next ordinary step, up to 200 us later, while the co-runners wait on an idle device.
inline uint64_t MonitorSleepNs(bool hand_over_waits, bool priority_held, bool others_share, bool work_left,
                               uint64_t until_grace_ends_ns) {
  uint64_t step;
  if (hand_over_waits) {
    step = 100'000;
  } else if (priority_held) {
    step = 200'000;
  } else if (others_share) {
    step = work_left ? 200'000 : 1'000'000;
  } else {
    // Alone, with work in flight: a newcomer waits for the grant until a step sees it, switches
    // tracking on and confirms the untracked work done. Idle, only the heartbeat needs renewing,
    // well within a lease (at least 20 ms).
    step = work_left ? 1'000'000 : 5'000'000;
  }
  constexpr uint64_t kLeastStepNs = 10'000;  // a grace ending now ends within a step: no spin
  // sabotage-point: priority-ends-at-monitor-step
  if (priority_held && until_grace_ends_ns != UINT64_MAX)
    step = std::min(step, std::max(until_grace_ends_ns + 1'000, kLeastStepNs));
  return step;
}

}  // namespace gpuslice::shim
