// gpuslicectl's exit codes: what a script driving it branches on.
#pragma once

namespace gpuslice::ctl {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;      // the state (plan: NVML) could not be read (missing, incompatible, corrupt)
inline constexpr int kExitUsage = 2;       // bad command line (plan: or a bad tenants file)
inline constexpr int kExitImpossible = 3;  // plan: the tenants' request cannot be met on these GPUs

}  // namespace gpuslice::ctl
