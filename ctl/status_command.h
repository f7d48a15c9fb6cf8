// `gpuslicectl status`: reads the broker's segment (reaping dead processes first, as any tenant
// would) and prints who holds how much of each GPU.
#pragma once

#include <optional>
#include <string>

namespace gpuslice::ctl {

struct StatusOptions {
  bool json = false;
  std::string state_dir;  // "" = DefaultStateDir()
  std::string pods_file;  // the device plugin's tenant -> pod map (common/pod_names.h)
};

// $GPUSLICE_STATE_DIR when set and non-empty, else /run/gpuslice: the directory the shim itself
// uses by default (shim/options.h), so that run beside a tenant the tool sees what it sees.
std::string DefaultStateDir();

// Prints the status on stdout; on failure one line on stderr. Returns the exit code.
int RunStatus(const StatusOptions& options);

// Why there is no segment to read in `dir`, in the operator's words (the directory is missing,
// or no tenant has run yet); empty when there may be one (the broker then judges the file).
std::optional<std::string> ExplainAbsence(const std::string& dir);

// The broker's one-line error without its "gpuslice: " prefix (gpuslicectl adds its own).
std::string WithoutBrokerPrefix(std::string error);

}  // namespace gpuslice::ctl
