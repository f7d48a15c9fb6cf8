// The exit statuses of gpuslice's programs (gpuslicectl, the exporter, the device plugin, the
// DRA driver, gpuslice-place), one table: what a script or an orchestrator branches on means the
// same whichever program it runs.
#pragma once

namespace gpuslice {

inline constexpr int kExitOk = 0;          // done; a daemon stopped by SIGTERM or SIGINT
inline constexpr int kExitFailure = 1;     // the work could not be done: NVML, the state file, a socket, a file
inline constexpr int kExitUsage = 2;       // bad command line or configuration (a flag, a config or tenants file)
inline constexpr int kExitImpossible = 3;  // gpuslicectl plan: the tenants' request cannot be met on these GPUs

}  // namespace gpuslice
