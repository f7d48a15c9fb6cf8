// The workload's exit codes: what a test or benchmark driving it branches on.
#pragma once

namespace gpuslice::workload {

inline constexpr int kExitOk = 0;            // also when allocations were refused: that is a result
inline constexpr int kExitDriverFailed = 1;  // a driver call failed unexpectedly
inline constexpr int kExitUsage = 2;         // bad options, or no usable driver or device

}  // namespace gpuslice::workload
