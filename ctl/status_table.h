// `gpuslicectl status` for people: one block per GPU (or MIG instance, under its GPU), a row per
// tenant and, indented beneath it, a row per process, then the GPU's quota commitment.
#pragma once

#include <string>

#include "broker/snapshot.h"
#include "common/pod_names.h"
#include "ctl/mig_topology.h"
#include "ctl/status_device.h"
#include "ctl/status_enforcement.h"

namespace gpuslice::ctl {

// The snapshot as text, ending in a newline. Expects SortForDisplay to have run. A GPU that is a
// MIG instance in `mig` is shown, indented, under a line for its GPU, beside that GPU's other
// instances.
// `devices` (NVML's, ctl/status_device.h) adds to each whole GPU a line of the device's own
// figures and one of the memory accounted here against them; `pods` (the device plugin's
// pods.json) a line under each Kubernetes tenant naming its pod; `enforcement` a line saying how
// each GPU's memory is enforced and, under each tenant the driver's limits hold, what they are.
std::string RenderStatusTable(const broker::Snapshot& snapshot, const MigTopology& mig = {},
                              const DeviceFiguresByUuid& devices = {}, const PodNames& pods = {},
                              const EnforcementByGpu& enforcement = {});

}  // namespace gpuslice::ctl
