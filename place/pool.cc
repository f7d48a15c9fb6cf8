#include "place/pool.h"

#include <algorithm>
#include <numeric>

#include "place/rng.h"

namespace gpuslice::place {

std::string MarkPool(Cluster& cluster, const std::vector<std::string>& names, const PoolOptions& options) {
  for (NodeState& node : cluster.nodes) node.pool = false;
  if (!options.nodes.empty()) {
    for (const std::string& wanted : options.nodes) {
      const auto it = std::find(names.begin(), names.end(), wanted);
      if (it == names.end()) return "--pool-nodes: no node is named '" + wanted + "'";
      cluster.nodes[static_cast<size_t>(it - names.begin())].pool = true;
    }
    return {};
  }
  std::vector<size_t> order(cluster.nodes.size());
  std::iota(order.begin(), order.end(), size_t{0});
  Rng rng(1);
  rng.Shuffle(order);
  const double goal = options.fraction * cluster.total_gpus;
  int taken = 0;
  for (size_t n : order) {
    if (taken >= goal) break;
    NodeState& node = cluster.nodes[n];
    if (node.gpus < options.min_gpus) continue;
    node.pool = true;
    taken += node.gpus;
  }
  return {};
}

}  // namespace gpuslice::place
