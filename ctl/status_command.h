// `gpuslicectl status`: reads the broker's segment (reaping dead processes first, as any tenant
// would) and prints who holds how much of each GPU.
#pragma once

#include <string>

namespace gpuslice::ctl {

struct StatusOptions {
  bool json = false;
  std::string state_dir;  // "" = DefaultStateDir()
};

// $GPUSLICE_STATE_DIR when set and non-empty, else /run/gpuslice: the directory the shim itself
// uses by default (shim/options.h), so that run beside a tenant the tool sees what it sees.
std::string DefaultStateDir();

// Prints the status on stdout; on failure one line on stderr. Returns the exit code.
int RunStatus(const StatusOptions& options);

}  // namespace gpuslice::ctl
