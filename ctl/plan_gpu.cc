#include "ctl/plan_gpu.h"

#include <algorithm>
#include <cctype>

#include "gpu/nvml_devices.h"

namespace gpuslice::ctl {
namespace {

// The short forms the documentation used before the simulator's names were accepted.
struct ModelAlias {
  const char* alias;
  const char* key;
};
constexpr ModelAlias kAliases[] = {{"h200", "H200"},
                                   {"h100-80", "H100-80GB"},
                                   {"a100-80", "A100-80GB"},
                                   {"a100-40", "A100-40GB"}};

// Lower case, without "nvidia" and separators: "NVIDIA H100 80GB HBM3" -> "h10080gbhbm3".
std::string Folded(const std::string& text) {
  std::string folded;
  for (unsigned char c : text)
    if (std::isalnum(c)) folded += static_cast<char>(std::tolower(c));
  if (folded.starts_with("nvidia")) folded.erase(0, 6);
  return folded;
}

// The forms of a model's names a value is compared with.
std::vector<std::string> FoldedNames(const gpu::MigGpuModel& model) {
  std::vector<std::string> names = {Folded(model.key), Folded(model.name)};
  for (const auto& a : kAliases)
    if (std::string(a.key) == model.key) names.push_back(Folded(a.alias));
  return names;
}

}  // namespace

Result<const gpu::MigGpuModel*> FindPlanModel(const std::string& value) {
  const std::string wanted = Folded(value);
  std::vector<const gpu::MigGpuModel*> prefixed;
  for (const auto& m : gpu::MigGpuModels()) {
    bool prefix = false;
    for (const std::string& name : FoldedNames(m)) {
      if (!wanted.empty() && name == wanted) return &m;
      prefix = prefix || (!wanted.empty() && name.starts_with(wanted));
    }
    if (prefix) prefixed.push_back(&m);
  }
  if (prefixed.size() == 1) return prefixed.front();
  if (prefixed.size() > 1) {
    std::string candidates;
    for (size_t i = 0; i < prefixed.size(); ++i)
      candidates += (i == 0 ? "" : i + 1 == prefixed.size() ? " or " : ", ") + std::string(prefixed[i]->key);
    return Status::InvalidArgument("--model '" + value + "' is ambiguous: " + candidates);
  }
  return Status::InvalidArgument("unknown --model '" + value + "'; expected " + PlanModelChoices());
}

std::string PlanModelKeys() {
  std::string keys;
  const auto& models = gpu::MigGpuModels();
  for (size_t i = 0; i < models.size(); ++i)
    keys += (i == 0 ? "" : i + 1 == models.size() ? " or " : ", ") + std::string(models[i].key);
  return keys;
}

std::string PlanModelChoices() {
  return PlanModelKeys() +
         " (GPUSLICE_SIM_MODEL's names, in any case; also h200, h100-80, a100-80, a100-40 or the driver's name)";
}

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
  gpu::NvmlDevices nvml;
  const auto devices = nvml.Read();
  if (!devices.ok()) return devices.status();
  std::vector<PlanGpu> found;
  for (int index : indices) {
    const auto it =
        std::find_if(devices->begin(), devices->end(), [&](const gpu::DeviceFigures& d) { return d.index == index; });
    if (it == devices->end()) {
      return Status::NotFound("NVML has no GPU " + std::to_string(index) + " (it lists " +
                              std::to_string(devices->size()) + (devices->size() == 1 ? " GPU)" : " GPUs)"));
    }
    found.push_back({index, it->name, it->uuid, it->memory_total, ModelOfDeviceName(it->name)});
  }
  return found;
}

}  // namespace gpuslice::ctl
