// The process's compute monitor: one thread, started at the first gated launch (never before),
// that drains this process's in-flight kernels when its tenant's grant must move, ends expired
// quanta and hands the GPU on (broker::ComputeGate::Monitor).
#pragma once

namespace gpuslice::shim {

class ShimState;

// Starts the monitor once per process (again in a forked child's new state).
void StartComputeMonitor(ShimState* state);

}  // namespace gpuslice::shim
