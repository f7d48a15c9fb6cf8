#include "place/node_selection.h"

#include <algorithm>
#include <numeric>

#include <fmt/format.h>

#include "place/rng.h"

namespace gpuslice::place {

std::string SelectNodes(const Cluster& cluster, const std::vector<std::string>& names, const NodeSelection& selection,
                        std::vector<bool>* chosen) {
  chosen->assign(cluster.nodes.size(), false);
  if (!selection.names.empty()) {
    for (const std::string& wanted : selection.names) {
      const auto it = std::find(names.begin(), names.end(), wanted);
      if (it == names.end()) return fmt::format("{}: no node is named '{}'", selection.option, wanted);
      (*chosen)[static_cast<size_t>(it - names.begin())] = true;
    }
    return {};
  }
  std::vector<size_t> order(cluster.nodes.size());
  std::iota(order.begin(), order.end(), size_t{0});
  Rng rng(selection.order_seed);
  rng.Shuffle(order);
  const double goal = selection.fraction * cluster.total_gpus;
  int taken = 0;
  for (size_t n : order) {
    if (taken >= goal) break;
    const NodeState& node = cluster.nodes[n];
    if (node.gpus < selection.min_gpus || node.gpus == 0) continue;
    (*chosen)[n] = true;
    taken += node.gpus;
  }
  return {};
}

}  // namespace gpuslice::place
