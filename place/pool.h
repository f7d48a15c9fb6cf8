// A reserved whole-node pool for big jobs: nodes kept for pods of at least `min_gpus` GPUs,
// which the field reaches for when first-fit strands GPUs next to gang jobs ("cluster at 60% but
// jobs queueing"). Smaller pods go there only as backfill that a big pod may reclaim (replay.cc:
// they are evicted and queued again, keeping their arrival time).
#pragma once

#include <string>
#include <vector>

#include "place/cluster.h"

namespace gpuslice::place {

struct PoolOptions {
  double fraction = 0;             // of the cluster's GPUs, in whole nodes
  std::vector<std::string> nodes;  // or these nodes by name (overrides fraction)
  int min_gpus = 4;                // pods of at least this many GPUs are "big"
};

// Sets NodeState::pool on `cluster` (in the node list's order, `names` alike). By fraction: nodes
// with at least min_gpus GPUs in a fixed pseudo-random order (the same pool for every policy and
// seed) until they hold the fraction of all GPUs. Returns an error for a name no node has.
std::string MarkPool(Cluster& cluster, const std::vector<std::string>& names, const PoolOptions& options);

}  // namespace gpuslice::place
