#include "place/home_pressure.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace gpuslice::place {

int Homes(const NodeState& node, const TargetClass& c) {
  if (c.num_gpu <= 0 || node.gpus == 0 || node.model < 0 || node.model >= 64 || !((c.model_mask >> node.model) & 1))
    return 0;
  int by_gpu = 0;
  if (c.num_gpu == 1 && c.gpu_milli < kMilliPerGpu) {
    for (int g = 0; g < node.gpus; ++g) by_gpu += node.gpu_left[static_cast<size_t>(g)] / c.gpu_milli;
  } else {
    by_gpu = node.FullyFreeGpus() / c.num_gpu;
  }
  int64_t homes = by_gpu;
  if (c.cpu_milli > 0) homes = std::min(homes, node.cpu_left / c.cpu_milli);
  if (c.memory_mib > 0) homes = std::min(homes, node.memory_left / c.memory_mib);
  return static_cast<int>(std::max<int64_t>(0, homes));
}

double PoissonTail(double mean, int64_t homes) {
  if (homes <= 0) return 1.0;
  if (mean <= 0) return 0.0;
  if (mean > 30) {  // the normal approximation, with continuity correction
    const double z = (static_cast<double>(homes) - 0.5 - mean) / std::sqrt(mean);
    return 0.5 * std::erfc(z / std::sqrt(2.0));
  }
  if (static_cast<double>(homes) > mean + 12 * std::sqrt(mean) + 20) return 0.0;
  double term = std::exp(-mean), below = 0;  // P(N = k), summed for k < homes
  for (int64_t k = 0; k < homes; ++k) {
    below += term;
    term *= mean / static_cast<double>(k + 1);
  }
  return std::max(0.0, 1.0 - below);
}

HomePressure::HomePressure(const TargetWorkload& target, const Cluster& cluster, int min_gpus) {
  const std::vector<TargetClass>& all = target.all_classes.empty() ? target.classes : target.all_classes;
  for (const TargetClass& c : all) {
    gpu_per_pod_ += c.weight * c.num_gpu * c.gpu_milli;
    cpu_per_pod_ += c.weight * static_cast<double>(c.cpu_milli);
    if (c.num_gpu == 0 || c.num_gpu < min_gpus) continue;
    classes_.push_back(c);
    size_.push_back(static_cast<double>(c.num_gpu) * c.gpu_milli);
  }
  node_homes_.assign(cluster.nodes.size() * classes_.size(), 0);
  node_version_.assign(cluster.nodes.size(), std::numeric_limits<uint32_t>::max());
  homes_.assign(classes_.size(), 0);
  value_.assign(classes_.size(), 0.0);
}

void HomePressure::Update(const Cluster& cluster) {
  int64_t free = 0, free_cpu = 0;
  for (size_t n = 0; n < cluster.nodes.size(); ++n) {
    const NodeState& node = cluster.nodes[n];
    free += node.GpuLeftTotal();
    free_cpu += node.cpu_left;
    if (node_version_[n] == node.version) continue;
    node_version_[n] = node.version;
    for (size_t c = 0; c < classes_.size(); ++c) {
      int& k = node_homes_[n * classes_.size() + c];
      const int now = Homes(node, classes_[c]);
      homes_[c] += now - k;
      k = now;
    }
  }
  // The cluster is full when its GPUs or its cores are taken, whichever comes first.
  expected_pods_ = gpu_per_pod_ > 0 ? static_cast<double>(free) / gpu_per_pod_ : 0;
  if (cpu_per_pod_ > 0) expected_pods_ = std::min(expected_pods_, static_cast<double>(free_cpu) / cpu_per_pod_);
  active_.clear();
  for (size_t c = 0; c < classes_.size(); ++c) {
    value_[c] = PoissonTail(classes_[c].weight * expected_pods_, homes_[c]) * size_[c];
    if (value_[c] > 1.0) active_.push_back(c);
  }
}

double HomePressure::Cost(const NodeState& before, const NodeState& after) const {
  double cost = 0;
  for (size_t c : active_) cost += value_[c] * (Homes(before, classes_[c]) - Homes(after, classes_[c]));
  return cost;
}

}  // namespace gpuslice::place
