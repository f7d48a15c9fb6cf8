// Placement policies: given a pod and the nodes that pass the filter (Fits), choose a node and
// its GPUs. The six baselines follow the FGD artifact's score plugins (kube-scheduler scores
// 0..100, the highest wins, ties to the first node in the run's node order) and its GPU selection.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "place/cluster.h"
#include "place/fragmentation.h"
#include "place/rng.h"

namespace gpuslice::place {

class Policy {
 public:
  virtual ~Policy() = default;
  // `feasible` is non-empty and lists node indices in cluster order.
  virtual Placement Choose(const Cluster& cluster, const Pod& pod, const std::vector<int>& feasible, Rng& rng) = 0;
};

// The artifact's six, the operators' two (first-fit, spread), then ours, in the order reports
// list them.
const std::vector<std::string>& PolicyNames();

// Our policy's knobs (policy_ours.cc); the defaults are the measured choice (docs/placement.md).
struct OurPolicyTuning {
  double best_fit_weight = 100.0;  // milli-GPU of fragmentation per unit of best-fit residual
  bool memory_aware = true;        // count memory in the target classes' fit
};
// FGD-BF-S: FGD-BF with the best-fit weight for shares (pods of less than one GPU) this many
// times the weight for other pods: shares follow the gradient more, whole GPUs pack as before.
inline constexpr double kShareBestFitFactor = 0.4;
// FGD-BF-C: FGD-BF-S plus, per milli-GPU of the node's free GPU that its free CPU can no longer
// feed (at the target workload's CPU per GPU), this many milli-GPU of fragmentation.
// sabotage-point: place-cpu-term-off
inline constexpr double kCpuStarvedWeight = 1.0;
// FGD-BF-H: FGD-BF-C plus, per milli-GPU of dead hole a share leaves on its GPU (or minus, per
// milli-GPU of one it fills), this many milli-GPU of fragmentation. A hole is dead when the
// shares of the target workload small enough to fill it are fewer than kRareShareFraction of its
// shares (by weight).
// sabotage-point: place-dead-holes-ignored
inline constexpr double kDeadHoleWeight = 3.0;
inline constexpr double kRareShareFraction = 0.05;
// FGD-BF-M (model-aware, and for clusters whose pods come and go): FGD-BF-H with, on every
// node, kModelScarcityWeight x the pod's milli-GPU x its model's scarcity (ScarcityNow,
// model_pressure.h: GPUs the pinned pods need over GPUs free, at most kScarcityCap), plus
// kOpenNodeCost milli-GPU for starting a node with nothing on it, and without FGD-BF-C's CPU term
// for CPU-only pods. One set for every pod list; only the pinned shares are the list's own.
inline constexpr double kModelScarcityWeight = 1.0;
inline constexpr double kScarcityCap = 4.0;
inline constexpr double kOpenNodeCost = 300.0;
// FGD-BF-G (for any cluster): FGD-BF-M with the best-fit residual as a share of the cluster's
// largest node (the artifact's 128 cores and 8 GPUs are the trace's largest), and, instead of the
// cost for an empty node, kHomeWeight x the milli-GPU of the pods of kHomeMinGpus GPUs or more
// expected to find no home (home_pressure.h); its CPU term counts GPUs starved at no more CPU per
// GPU than the cluster has (ClusterCpuPerGpu).
// sabotage-point: place-homes-ignored
inline constexpr double kHomeWeight = 1.0;
inline constexpr int kHomeMinGpus = 2;
// The smallest share size (milli-GPU) at which the target's shares of that size or less reach
// `rare` of its shares; holes below it are dead. 0 without shares.
int DeadHoleThreshold(const TargetWorkload& target, double rare);
// The target workload's milli-CPU per milli-GPU over its GPU classes, by weight.
double CpuPerGpu(const TargetWorkload& target);
// Milli-CPU per milli-GPU of the cluster's nodes with GPUs, all together; 0 without GPUs.
double ClusterCpuPerGpu(const Cluster& cluster);
// Milli-GPU free on `node` beyond what its free CPU feeds at `cpu_per_gpu`.
double CpuStarvedGpu(int64_t cpu_left, int64_t gpu_left, double cpu_per_gpu);

// Null for an unknown name. `score_classes` sizes the per-node score caches of FGD-like ones.
std::unique_ptr<Policy> MakePolicy(std::string_view name, const TargetWorkload& target, const Cluster& cluster,
                                   int score_classes, const OurPolicyTuning& tuning = {});

// The artifact's selectHost (its kube-scheduler fork): the highest score; among equal scores the
// node whose name sorts first. Names carry a per-seed random prefix, so the simulator puts nodes
// in that order (experiment.cc) and ties go to the first feasible node.
int PickHighest(const std::vector<int>& feasible, const std::vector<int64_t>& scores);

// Policies' scores and GPU choices, exposed for the tests' hand-computed answers.
int64_t DotProductScore(const NodeState& node, const Pod& pod);
int64_t GpuClusteringScore(const NodeState& node, const Pod& pod);
int64_t GpuPackingScore(const NodeState& node, const Pod& pod);
int64_t BestFitRawScore(const NodeState& node, const Pod& pod);
// Spread (policy_operator.cc): the node's free share of CPU and GPU after placement, 0..100.
int64_t SpreadScore(const NodeState& node, const Pod& pod);
// FirstFit's GPUs: the first GPU with room for a share, the first free GPUs otherwise.
GpuMask FirstGpusWithRoom(const NodeState& node, const Pod& pod);
// Spread's GPUs: the GPU with the most room for a share, the first free GPUs otherwise.
GpuMask RoomiestGpu(const NodeState& node, const Pod& pod);
struct FgdChoice {
  double delta = 0;   // fragmentation after minus before, milli-GPU (lower is better)
  int64_t score = 0;  // the artifact's int(sigmoid(-delta/1000) * 100)
  GpuMask gpus = 0;
};
FgdChoice FgdEvaluate(const NodeState& node, const Pod& pod, const TargetWorkload& target, double frag_before);

}  // namespace gpuslice::place
