#include "place/mig.h"

#include <algorithm>
#include <bit>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "gpu/mig_profiles.h"
#include "place/node_selection.h"

namespace gpuslice::place {

std::string ParseMigLayout(const MigOptions& options, MigLayout* layout) {
  const gpu::MigGpuModel* model = gpu::FindMigGpuModel(options.model);
  if (model == nullptr) {
    std::vector<std::string> valid;
    for (const gpu::MigGpuModel& m : gpu::MigGpuModels()) valid.emplace_back(m.key);
    return fmt::format("--mig-model: '{}' is not a MIG model; valid: {}", options.model, fmt::join(valid, ", "));
  }
  const Result<std::vector<gpu::MigPlacement>> placed = gpu::ValidateMigLayout(*model, options.layout);
  if (!placed.ok()) return fmt::format("--mig-layout: {}", placed.message());
  *layout = MigLayout{};
  for (const gpu::MigPlacement& p : *placed) {
    layout->profiles.push_back(p.profile->name);
    const int compute = kMilliPerGpu * p.profile->compute_slices / gpu::kMigComputeSlices;
    const int memory = kMilliPerGpu * p.profile->memory_slices / gpu::kMigMemorySlices;
    layout->capacity.push_back(static_cast<int16_t>(std::min(compute, memory)));
  }
  std::sort(layout->capacity.begin(), layout->capacity.end());
  return {};
}

std::string MarkMigNodes(Cluster& cluster, const std::vector<std::string>& names, const MigOptions& options,
                         const MigLayout& layout) {
  NodeSelection selection;
  selection.fraction = options.fraction;
  selection.names = options.nodes;
  selection.order_seed = 2;  // not the pool's order: the two sets do not coincide by construction
  selection.option = "--mig-nodes";
  std::vector<bool> chosen;
  if (std::string error = SelectNodes(cluster, names, selection, &chosen); !error.empty()) return error;
  for (size_t n = 0; n < cluster.nodes.size(); ++n) {
    NodeState& node = cluster.nodes[n];
    if (!chosen[n] || node.gpus == 0) continue;
    if (node.mig) continue;
    node.mig = true;
    node.mig_instances = static_cast<int8_t>(layout.capacity.size());
    int16_t per_gpu = 0;
    for (size_t i = 0; i < layout.capacity.size(); ++i) {
      node.mig_capacity[i] = layout.capacity[i];
      per_gpu = static_cast<int16_t>(per_gpu + layout.capacity[i]);
    }
    for (int g = 0; g < node.gpus; ++g) node.gpu_left[static_cast<size_t>(g)] = per_gpu;
    ++node.version;
  }
  return {};
}

int MarkMigPods(std::vector<Pod>& pods, int score_classes, bool isolate_paid, bool open) {
  for (Pod& pod : pods) {
    pod.isolated = isolate_paid && pod.tier == 1 && pod.IsFractional();
    pod.may_use_mig = open && pod.IsFractional();
    pod.score_class = pod.score_class * 2 + (pod.isolated ? 1 : 0);
  }
  return score_classes * 2;
}

MigUse CountMig(const NodeState& node) {
  MigUse use;
  if (!node.mig) return use;
  use.instances = node.gpus * node.mig_instances;
  for (int g = 0; g < node.gpus; ++g) {
    const uint8_t used = node.mig_used[static_cast<size_t>(g)];
    use.used += std::popcount(used);
    for (int i = 0; i < node.mig_instances; ++i) {
      if ((used >> i) & 1) use.used_capacity_milli += node.mig_capacity[static_cast<size_t>(i)];
    }
  }
  return use;
}

}  // namespace gpuslice::place
