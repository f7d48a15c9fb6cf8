// The directories the driver works in, checked (and its own created) before it serves: the
// plugin directory, which holds its DRAPlugin socket and checkpoint, is the driver's and is
// created as the kubelet plugin helpers create it; the kubelet's plugins_registry and the
// container runtime's CDI directory belong to others, and a missing one is named, never
// created (a directory made at a mistyped path would leave the kubelet or the runtime looking
// elsewhere).
#pragma once

#include "common/status.h"
#include "dra/driver_config.h"

namespace gpuslice::dra {

// The plugin directory's mode when the driver creates it (with its missing parents): the
// socket and the checkpoint are for root and the kubelet only.
inline constexpr unsigned kPluginDirMode = 0750;

// Creates --plugin-dir if missing; an error with one line naming the flag and the path when a
// directory cannot be created or (--registry-dir, --cdi-dir) does not exist.
Status PrepareDirectories(const DriverConfig& config);

}  // namespace gpuslice::dra
