// A cluster's state during a placement run: what each node has left, and which pod kinds sit
// on it. Pods are the trace's specifications reduced to what placement needs.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "place/trace.h"

namespace gpuslice::place {

// The artifact's pod kinds (its GpuNumTypeList), used for failures by type and GPU clustering.
enum class PodKind { kPureCpu, kShareGpu, kOneGpu, kTwoGpu, kFourGpu, kEightGpu, kOthers };
inline constexpr int kPodKinds = 7;
// Tiers (place/tiers.h): 0 free, 1 paid. With tiers kept apart, pods of two tiers never share a
// physical GPU.
inline constexpr int kTiers = 2;
// A MIG GPU holds at most 7 GPU instances (7 compute slices).
inline constexpr int kMaxMigInstances = 7;
const char* PodKindName(PodKind kind);

struct Pod {
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  int num_gpu = 0;
  int gpu_milli = 0;
  uint64_t model_mask = ~uint64_t{0};  // GPU models (bit per Cluster::models index) it may use
  int score_class = 0;                 // id of (cpu, gpu_milli, num_gpu): pods alike for scoring
  PodKind kind = PodKind::kPureCpu;
  int tier = 0;
  bool keep_tier_apart = false;  // may take no GPU that holds a pod of another tier
  bool isolated = false;         // needs a MIG instance of its own (mig.h); only shares are
  bool may_use_mig = false;      // a share not isolated that may still take a free MIG instance

  int64_t TotalGpuMilli() const { return int64_t{num_gpu} * gpu_milli; }
  bool IsFractional() const { return num_gpu == 1 && gpu_milli < kMilliPerGpu; }
};

struct NodeState {
  int64_t cpu_left = 0;
  int64_t cpu_capacity = 0;
  int64_t memory_left = 0;
  int gpus = 0;
  int model = -1;                                   // index into Cluster::models; -1 without GPUs
  std::array<int16_t, kMaxGpusPerNode> gpu_left{};  // milli-GPU free on each GPU
  // Placed GPU pods by affinity tag (the artifact's GpuAffinity): [0] shared, [k] k-GPU pods.
  std::array<int32_t, kMaxGpusPerNode + 1> affinity{};
  // Pods of each tier on each GPU.
  std::array<std::array<int16_t, kTiers>, kMaxGpusPerNode> tier_pods{};
  bool pool = false;  // reserved for big pods (pool.h)
  // MIG (mig.h): every GPU partitioned into the same instances, milli-GPU each, smallest first;
  // bit i of mig_used[g] set while instance i of GPU g holds a pod. gpu_left of a MIG GPU is the
  // capacity of its free instances.
  bool mig = false;
  int8_t mig_instances = 0;
  std::array<int16_t, kMaxMigInstances> mig_capacity{};
  std::array<uint8_t, kMaxGpusPerNode> mig_used{};
  uint32_t version = 0;  // bumped on every change: caches keyed by it stay valid until then

  int GpuLeftTotal() const;
  int FullyFreeGpus() const;
  int DistinctAffinities() const;
};

// GPUs a placement uses, as a bit mask over the node's GPU indices.
using GpuMask = uint32_t;

struct Placement {
  int node = -1;
  GpuMask gpus = 0;
};

struct Cluster {
  std::vector<std::string> models;
  std::vector<NodeState> nodes;
  int64_t total_gpu_milli = 0;
  int total_gpus = 0;
};

Cluster BuildCluster(const std::vector<NodeSpec>& specs);
// Pods resolved against the cluster's model list; score classes numbered in order of first use.
std::vector<Pod> BuildPods(const std::vector<PodSpec>& specs, const Cluster& cluster, int* score_classes);

// The artifact's filter: GPU model, CPU and memory, and enough GPUs with room for the share.
bool Fits(const NodeState& node, const Pod& pod);
// GPUs on `node` that can take one share of `pod`, as a mask.
GpuMask GpusWithRoom(const NodeState& node, int gpu_milli);
// GPUs on `node` that `pod` may take one share of: room for it (and, with tiers kept apart, no
// pod of another tier). On a MIG node only isolated pods (and shares that may_use_mig), and only
// GPUs with a free instance that covers the share; isolated pods nowhere else. Every policy's GPU choice goes through
// this.
GpuMask GpusWithRoom(const NodeState& node, const Pod& pod);
// The first `count` fully free GPUs by index (the artifact's AllocateExclusiveGpuId).
GpuMask FirstFreeGpus(const NodeState& node, int count);
// NVLink islands: a node's GPUs in groups of `island_size` consecutive indices. `count` free GPUs
// from the island with the fewest free GPUs that still holds them all (the first such island);
// FirstFreeGpus when no island does.
GpuMask IslandFreeGpus(const NodeState& node, int count, int island_size);
// How many of the GPU pairs in `gpus` share an island.
int PairsOnOneIsland(GpuMask gpus, int island_size);
// The mean bandwidth of the GPU pairs in `gpus`, as a fraction of NVLink's: 1 for a pair on one
// island, `pcie_ratio` (PCIe's bandwidth / NVLink's) for a pair across. 1 for fewer than two GPUs.
double RelativePairBandwidth(GpuMask gpus, int island_size, double pcie_ratio);
// The artifact's "best" GPU choice: the tightest GPU for a share, first free GPUs otherwise.
GpuMask BestFitGpus(const NodeState& node, const Pod& pod);
// On a MIG GPU the pod takes the smallest free instance that covers it, and all of its capacity.
void Place(NodeState& node, const Pod& pod, GpuMask gpus);
// Undoes Place (a gang that did not fit as a whole gives back what its members took).
void Unplace(NodeState& node, const Pod& pod, GpuMask gpus);

}  // namespace gpuslice::place
