#include "dra/node_devices.h"

#include <fmt/format.h>

namespace gpuslice::dra {

std::vector<NodeDevice> NameDevices(const std::vector<gpu::GpuInfo>& gpus) {
  std::vector<NodeDevice> devices;
  for (const auto& gpu : gpus) {
    const std::string name = gpu.mig_index >= 0 ? fmt::format("gpu-{}-mig-{}", gpu.index, gpu.mig_index)
                                                : fmt::format("gpu-{}", gpu.index);
    devices.push_back({name, gpu, ""});
  }
  return devices;
}

std::string MigProfile(const NodeDevice& device) {
  if (device.gpu.mig_index < 0) return "";
  // NVML names an instance "<GPU name> MIG <profile>"; a profile is one word, and whatever
  // follows it (a simulated device's " (simulated)") is not part of it.
  const auto at = device.gpu.name.rfind(" MIG ");
  if (at == std::string::npos) return "";
  const std::string profile = device.gpu.name.substr(at + 5);
  return profile.substr(0, profile.find(' '));
}

std::string Model(const NodeDevice& device) {
  std::string model = device.gpu.name;
  if (const auto at = model.find(" MIG "); at != std::string::npos) model.resize(at);
  if (model.starts_with("NVIDIA ")) model.erase(0, 7);
  return model;
}

const NodeDevice* FindDevice(const std::vector<NodeDevice>& devices, const std::string& name) {
  for (const auto& d : devices) {
    if (d.name == name) return &d;
  }
  return nullptr;
}

}  // namespace gpuslice::dra
