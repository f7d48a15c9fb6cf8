// The node's devices as the DRA driver publishes them: one per whole GPU and one per MIG
// instance of a GPU in MIG mode (a MIG-mode GPU runs work only inside its instances), each
// named with a DNS label the claims' allocation results refer to.
#pragma once

#include <string>
#include <vector>

#include "gpu/gpu_inventory.h"

namespace gpuslice::dra {

struct NodeDevice {
  std::string name;  // "gpu-3", or "gpu-3-mig-1" for instance 1 of GPU 3
  gpu::GpuInfo gpu;
  std::string problem;  // why it is unhealthy (dra/device_health.h); empty when it is healthy
};

std::vector<NodeDevice> NameDevices(const std::vector<gpu::GpuInfo>& gpus);

// "3g.71gb" from an instance's NVML name ("NVIDIA H200 MIG 3g.71gb"); empty for a whole GPU.
std::string MigProfile(const NodeDevice& device);
// The product without vendor and MIG suffix ("H200" of "NVIDIA H200 MIG 3g.71gb").
std::string Model(const NodeDevice& device);

const NodeDevice* FindDevice(const std::vector<NodeDevice>& devices, const std::string& name);

}  // namespace gpuslice::dra
