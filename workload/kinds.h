// The four workloads. Each opens its own Session, prints its JSON lines and returns the exit
// code (exit_codes.h).
#pragma once

#include "workload/options.h"

namespace gpuslice::workload {

// Back-to-back spin kernels, `depth` in flight: throughput and busy fraction.
int RunCompute(const CommonOptions& common, const ComputeOptions& options);
// Periodic requests of a few short kernels each: latency percentiles and missed periods.
int RunLatency(const CommonOptions& common, const LatencyOptions& options);
// Steps of many short kernels then a synchronisation (with --graph, one graph launch a step):
// steps and launches per second, step latency.
int RunSteps(const CommonOptions& common, const StepsOptions& options);
// `count` allocations of `chunk` through one allocation API: obtained versus refused.
int RunMemory(const CommonOptions& common, const MemoryOptions& options);

}  // namespace gpuslice::workload
