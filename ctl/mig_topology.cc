#include "ctl/mig_topology.h"

#include "gpu/gpu_inventory.h"

namespace gpuslice::ctl {

std::string UuidKey(const std::string& uuid) { return uuid.size() > 4 ? uuid.substr(4) : uuid; }

MigTopology ReadMigTopology() {
  MigTopology topology;
  Result<std::unique_ptr<gpu::GpuInventory>> inventory = gpu::GpuInventory::Open(gpu::kNvmlLibrary);
  if (!inventory.ok()) return topology;  // no NVML: no MIG instances to name
  const Result<gpu::Discovery> found = (*inventory)->Discover();
  if (!found.ok()) return topology;
  for (const gpu::GpuInfo& instance : found->gpus) {
    if (instance.mig_index < 0 || instance.uuid.empty()) continue;  // a whole GPU
    MigInstanceInfo info;
    info.uuid = instance.uuid;
    // NVML names an instance "<GPU name> MIG <profile>"; a profile is one word, and whatever
    // follows it (a simulated device's " (simulated)") is not part of it.
    const size_t at = instance.name.rfind(" MIG ");
    info.profile = at == std::string::npos ? instance.name : instance.name.substr(at + 5);
    info.profile = info.profile.substr(0, info.profile.find(' '));
    info.gpu_index = instance.index;
    info.gpu_uuid = instance.parent_uuid;
    info.gpu_name = instance.parent_name;
    topology[UuidKey(info.uuid)] = info;
  }
  return topology;
}

}  // namespace gpuslice::ctl
