#include "ctl/plan_gpu.h"

#include <algorithm>
#include <cctype>

#include "exporter/nvml_devices.h"

namespace gpuslice::ctl {
namespace {

struct ModelAlias {
  const char* alias;
  const char* key;
};
constexpr ModelAlias kAliases[] = {{"h200", "H200"},
                                   {"h100-80", "H100-80GB"},
                                   {"a100-80", "A100-80GB"},
                                   {"a100-40", "A100-40GB"}};

std::string Lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
  return text;
}

}  // namespace

const gpu::MigGpuModel* FindPlanModel(const std::string& value) {
  const std::string lower = Lower(value);
  for (const auto& a : kAliases)
    if (lower == a.alias) return gpu::FindMigGpuModel(a.key);
  for (const auto& m : gpu::MigGpuModels())
    if (lower == Lower(m.key)) return &m;
  return nullptr;
}

const char* PlanModelChoices() { return "h200, h100-80, a100-80 or a100-40"; }

std::vector<PlanGpu> GpusOfModel(const gpu::MigGpuModel& model, int count) {
  std::vector<PlanGpu> gpus;
  for (int i = 0; i < count; ++i) gpus.push_back({i, model.name, "", model.memory_bytes, &model});
  return gpus;
}

const gpu::MigGpuModel* ModelOfDeviceName(const std::string& name) {
  // The table's names are the driver's (gpu/mig_profiles.cc); the simulator appends " (simulated)".
  for (const auto& m : gpu::MigGpuModels())
    if (name == m.name || name == std::string(m.name) + " (simulated)") return &m;
  return nullptr;
}

Result<std::vector<PlanGpu>> ReadNvmlGpus(const std::vector<int>& indices) {
  exporter::NvmlDevices nvml;
  const auto devices = nvml.Read();
  if (!devices.ok()) return devices.status();
  std::vector<PlanGpu> found;
  for (int index : indices) {
    const auto it = std::find_if(devices->begin(), devices->end(),
                                 [&](const exporter::DeviceFigures& d) { return d.index == index; });
    if (it == devices->end()) {
      return Status::NotFound("NVML has no GPU " + std::to_string(index) + " (it lists " +
                              std::to_string(devices->size()) + (devices->size() == 1 ? " GPU)" : " GPUs)"));
    }
    found.push_back({index, it->name, it->uuid, it->memory_total, ModelOfDeviceName(it->name)});
  }
  return found;
}

}  // namespace gpuslice::ctl
