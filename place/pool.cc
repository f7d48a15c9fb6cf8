#include "place/pool.h"

#include "place/node_selection.h"

namespace gpuslice::place {

std::string MarkPool(Cluster& cluster, const std::vector<std::string>& names, const PoolOptions& options) {
  NodeSelection selection;
  selection.fraction = options.fraction;
  selection.names = options.nodes;
  selection.min_gpus = options.min_gpus;
  selection.order_seed = 1;
  selection.option = "--pool-nodes";
  std::vector<bool> chosen;
  const std::string error = SelectNodes(cluster, names, selection, &chosen);
  for (size_t n = 0; n < cluster.nodes.size(); ++n) cluster.nodes[n].pool = error.empty() && chosen[n];
  return error;
}

}  // namespace gpuslice::place
