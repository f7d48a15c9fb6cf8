// The process's compute monitor: one thread, started at the first gated launch (never before),
// that follows this process's in-flight launches, renews its lease on the GPUs it uses, and takes
// its part in the grant protocol (LaunchTracker::MonitorStep). Stopped and joined before the
// process leaves the broker, so it never writes into a slot another process has taken.
#pragma once

namespace gpuslice::shim {

class ShimState;

// Starts the monitor once per process (again in a forked child's new state).
void StartComputeMonitor(ShimState* state);
// Stops the monitor of `state` and waits for it (at most about a second). False when it did not
// stop in time: the caller must then not give up what the monitor writes to.
bool StopComputeMonitor(ShimState* state);

}  // namespace gpuslice::shim
