// One look at the node's devices through NVML, for a poll of the driver: the devices to publish
// and what is wrong with each. A device published before that NVML still lists but that no
// longer answers (a GPU fallen off the bus, one that needs a reset) stays, with its problem, so
// that its taint and its health say what happened; one that is gone from NVML, or answers as
// another device (a changed MIG layout), is dropped. A GPU that does not answer at the driver's
// start is not known, and is left out with a line until it answers.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "dra/device_health.h"
#include "dra/node_devices.h"
#include "gpu/gpu_inventory.h"

namespace gpuslice::dra {

struct DeviceSurvey {
  std::vector<NodeDevice> devices;                // to publish, by NVML index and MIG index
  std::map<std::string, DeviceProblem> problems;  // by device name; absent: healthy
  std::string left_out_lines;                     // GPUs not published, one line each
};

Result<DeviceSurvey> SurveyDevices(gpu::GpuInventory& inventory, const std::vector<NodeDevice>& published);

// The devices of `survey`, each unhealthy one with its condition's message as its problem: a
// claim on it is refused until it recovers (dra/claim_allocation.h).
std::vector<NodeDevice> DevicesForClaims(const DeviceSurvey& survey,
                                         const std::map<std::string, DeviceCondition>& conditions);

}  // namespace gpuslice::dra
