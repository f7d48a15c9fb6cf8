// Choosing a set of nodes for a role (the reserved pool, MIG-partitioned nodes): by name, or by
// a share of the cluster's GPUs in a fixed pseudo-random order, so that every policy and seed
// gets the same set.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "place/cluster.h"

namespace gpuslice::place {

struct NodeSelection {
  double fraction = 0;             // of the cluster's GPUs, in whole nodes
  std::vector<std::string> names;  // or these nodes by name (overrides fraction)
  int min_gpus = 1;                // by fraction: only nodes with at least this many GPUs
  uint64_t order_seed = 1;         // the pseudo-random order nodes are taken in, by fraction
  std::string option;              // the option naming nodes, for the error ("--pool-nodes")
};

// chosen[n] for cluster.nodes[n] (`names` in the same order). By fraction: nodes with at least
// min_gpus GPUs in the order of order_seed until they hold the fraction of all GPUs. Returns an
// error for a name no node has.
std::string SelectNodes(const Cluster& cluster, const std::vector<std::string>& names, const NodeSelection& selection,
                        std::vector<bool>* chosen);

}  // namespace gpuslice::place
