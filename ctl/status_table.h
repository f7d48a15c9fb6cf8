// `gpuslicectl status` for people: one block per GPU (or MIG instance, under its GPU), a row per
// tenant and, indented beneath it, a row per process, then the GPU's quota commitment.
#pragma once

#include <string>

#include "broker/broker.h"
#include "ctl/mig_topology.h"
#include "ctl/status_device.h"

namespace gpuslice::ctl {

// The snapshot as text, ending in a newline. Expects SortForDisplay to have run. A GPU that is a
// MIG instance in `mig` is shown, indented, under a line for its GPU, beside that GPU's other
// instances.
// `devices` (NVML's, ctl/status_device.h) adds to each whole GPU a line of the device's own
// figures and one of the memory accounted here against them.
std::string RenderStatusTable(const broker::Snapshot& snapshot, const MigTopology& mig = {},
                              const DeviceFiguresByUuid& devices = {});

}  // namespace gpuslice::ctl
