// MIG-partitioned nodes: some nodes' GPUs are split into MIG GPU instances, the same layout on
// every GPU (NVIDIA's profiles, gpu/mig_profiles.h: the tables the simulated driver and
// `gpuslicectl plan` use). Pods that require isolation (the paid tier's shares, tiers.h) fit
// only a free instance that covers them, one pod per instance, and take all of it. Other pods do
// not use MIG GPUs (they ask for whole or shared GPUs, which a partitioned GPU does not offer),
// though CPU-only pods may use a MIG node's CPU and memory; with `open`, other shares may take a
// free instance that covers them, a whole one each, as an isolated pod would (whole-GPU pods
// never: no instance is a whole GPU unless the layout is one 7g).
//
// An instance's size in the trace's milli-GPU is the smaller of its compute and memory shares:
// min(1000 x compute slices / 7, 1000 x memory slices / 8); 3g.40gb is 428, 2g.20gb 250,
// 1g.10gb 125, 7g.80gb 1000. The trace's gpu_milli is a share of both a GPU's time and its memory
// (Alibaba's GPU sharing), so an instance covers a pod when that size is at least gpu_milli. The
// trace's GPU models (T4, P100, V100, ...) have no MIG; the layout is that of an A100/H100-80GB
// (or of the model --mig-model names) applied to whatever GPU the node has, which is what
// the experiment asks: what a MIG partition costs in packing, not which GPU supports it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "place/cluster.h"

namespace gpuslice::place {

struct MigOptions {
  double fraction = 0;             // of the cluster's GPUs, in whole nodes
  std::vector<std::string> nodes;  // or these nodes by name (overrides fraction)
  std::string model = "A100-80GB";
  std::string layout = "3g.40gb,2g.20gb,1g.10gb,1g.10gb";
  bool isolate_paid = false;  // the paid tier's shares need an instance (with --tiers)
  bool open = false;          // other shares may take a free instance too (a whole one each)

  bool Enabled() const { return fraction > 0 || !nodes.empty(); }
};

struct MigLayout {
  std::vector<std::string> profiles;  // as given
  std::vector<int16_t> capacity;      // milli-GPU per instance, smallest first
};

// Checks the layout against NVIDIA's placement rules for the model; one line naming the option
// and what would be valid if it is not one.
std::string ParseMigLayout(const MigOptions& options, MigLayout* layout);

// Partitions the chosen nodes' GPUs (node_selection.h; nodes with GPUs, in an order of their own,
// not the pool's). `names` in the cluster's order. An error for a name no node has.
std::string MarkMigNodes(Cluster& cluster, const std::vector<std::string>& names, const MigOptions& options,
                         const MigLayout& layout);

// With isolate_paid, marks the paid tier's shares isolated and splits their score classes (their GPUs with room
// differ, and the policies cache per class); with `open`, lets the other shares use instances.
// Returns the new number of classes.
int MarkMigPods(std::vector<Pod>& pods, int score_classes, bool isolate_paid, bool open);

// Instances on a MIG node: all, held, and the milli-GPU they hold (sum of their capacity).
struct MigUse {
  int instances = 0, used = 0;
  int64_t used_capacity_milli = 0;
};
MigUse CountMig(const NodeState& node);

}  // namespace gpuslice::place
