// gpuslice-workload's command line: `gpuslice-workload <compute|latency|steps|memory> [options]`.
#pragma once

#include <optional>

#include "workload/options.h"

namespace gpuslice::workload {

enum class Kind { kCompute, kLatency, kMemory, kSteps };

struct Invocation {
  Kind kind = Kind::kCompute;
  CommonOptions common;
  ComputeOptions compute;
  LatencyOptions latency;
  MemoryOptions memory;
  StepsOptions steps;
};

// Fills *out and returns nullopt when the run should go ahead; otherwise returns the exit code to
// end with, after printing the help (0) or what is wrong with the options (kExitUsage).
std::optional<int> ParseCommandLine(int argc, char** argv, Invocation* out);

}  // namespace gpuslice::workload
