// How scarce each GPU model is for the pods that can use only some models. FGD-BF-M
// (policy_ours.cc) charges a GPU pod for taking a model's GPUs in proportion to that scarcity,
// so pods that could go elsewhere leave a model to the pods that need it. Measured (docs/
// placement.md): best fit alone packs small nodes first, and in the trace the small nodes (2-GPU
// T4 and P100) are the models most gpu_spec pods pin to; the 128-core G3 nodes are the only ones
// the 8-GPU pods of 120 cores fit.
#pragma once

#include <vector>

#include "place/cluster.h"
#include "place/fragmentation.h"

namespace gpuslice::place {

// Per Cluster::models index: the GPUs of that model the pinned pods need when the arrived GPU
// demand equals the cluster's GPUs, as a share of the model's GPUs (may exceed 1). A class is
// pinned when the models whose empty nodes could hold it (its gpu_spec, narrowed by GPUs, CPU
// and memory) are not all the cluster's; it is spread over those models by their GPUs. Counted
// over every class of the pod list (TargetWorkload::all_classes), as pinned classes are many
// and rare. All 0 when nothing is pinned. `cluster` is the cluster before any placement.
std::vector<double> PinnedShare(const TargetWorkload& target, const Cluster& cluster);

// The scarcity of each model now: its pinned GPUs (PinnedShare x its GPUs) over its free GPUs
// (at least one), at most `cap`. It rises as a model fills, so its last GPUs are guarded most.
std::vector<double> ScarcityNow(const std::vector<double>& pinned_share, const Cluster& cluster, double cap);

}  // namespace gpuslice::place
