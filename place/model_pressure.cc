#include "place/model_pressure.h"

#include <algorithm>

namespace gpuslice::place {
namespace {

// GPUs per model index (the first 64 models: a pod's model mask has 64 bits).
std::vector<double> GpusPerModel(const Cluster& cluster) {
  std::vector<double> gpus(std::min<size_t>(cluster.models.size(), 64), 0.0);
  for (const NodeState& node : cluster.nodes) {
    if (node.model >= 0 && static_cast<size_t>(node.model) < gpus.size())
      gpus[static_cast<size_t>(node.model)] += node.gpus;
  }
  return gpus;
}

// The models (a bit per model index, of the first `models`) whose empty nodes could hold class
// `c`: its gpu_spec, narrowed by GPUs, cores and memory. The class is pinned when these are some
// but not all of the models present.
uint64_t ModelsThatHold(const TargetClass& c, const Cluster& cluster, size_t models) {
  uint64_t fits = 0;
  for (const NodeState& node : cluster.nodes) {
    if (node.model < 0 || static_cast<size_t>(node.model) >= models || !((c.model_mask >> node.model) & 1)) continue;
    if (node.gpus >= c.num_gpu && node.cpu_capacity >= c.cpu_milli && node.memory_left >= c.memory_mib) {
      fits |= uint64_t{1} << node.model;
    }
  }
  return fits;
}

}  // namespace

std::vector<double> PinnedShare(const TargetWorkload& target, const Cluster& cluster) {
  const std::vector<double> gpus = GpusPerModel(cluster);
  const size_t models = gpus.size();
  uint64_t present = 0;
  double total_gpus = 0;
  for (size_t m = 0; m < models; ++m) {
    present |= gpus[m] > 0 ? uint64_t{1} << m : 0;
    total_gpus += gpus[m];
  }
  std::vector<double> pinned(models, 0.0);
  double demand = 0;  // milli-GPU per pod of the list
  for (const TargetClass& c : target.all_classes.empty() ? target.classes : target.all_classes) {
    const double gpu = c.weight * c.num_gpu * c.gpu_milli;
    demand += gpu;
    if (gpu == 0) continue;
    const uint64_t fits = ModelsThatHold(c, cluster, models);
    if (fits == 0 || (fits & present) == present) continue;  // fits nowhere (impossible.h), or anywhere
    double allowed = 0;
    for (size_t m = 0; m < models; ++m) allowed += ((fits >> m) & 1) ? gpus[m] : 0;
    for (size_t m = 0; m < models; ++m) {
      if ((fits >> m) & 1) pinned[m] += gpu * gpus[m] / allowed;
    }
  }
  if (demand <= 0) return std::vector<double>(models, 0.0);
  // The list's pods scaled to the cluster's GPUs: demand x pods = total_gpus x 1000.
  const double pods = total_gpus * kMilliPerGpu / demand;
  for (size_t m = 0; m < models; ++m) pinned[m] = gpus[m] > 0 ? pinned[m] * pods / (gpus[m] * kMilliPerGpu) : 0;
  return pinned;
}

std::vector<double> ScarcityNow(const std::vector<double>& pinned_share, const Cluster& cluster, double cap) {
  std::vector<double> capacity(pinned_share.size(), 0.0), free(pinned_share.size(), 0.0);
  for (const NodeState& node : cluster.nodes) {
    if (node.model < 0 || static_cast<size_t>(node.model) >= pinned_share.size()) continue;
    capacity[static_cast<size_t>(node.model)] += node.gpus * kMilliPerGpu;
    free[static_cast<size_t>(node.model)] += node.GpuLeftTotal();
  }
  std::vector<double> scarcity(pinned_share.size(), 0.0);
  for (size_t m = 0; m < scarcity.size(); ++m) {
    if (pinned_share[m] > 0)
      scarcity[m] = std::min(cap, pinned_share[m] * capacity[m] / std::max(free[m], double{kMilliPerGpu}));
  }
  return scarcity;
}

}  // namespace gpuslice::place
