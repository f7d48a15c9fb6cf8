// Random, DotProd, GpuClustering, GpuPacking and BestFit as the FGD artifact scores them
// (pkg/simulator/plugin/*_score.go); integer arithmetic where the artifact uses it, since its
// truncations decide ties.
#include <algorithm>
#include <bit>
#include <cmath>

#include "place/policy.h"

namespace gpuslice::place {

int PickHighest(const std::vector<int>& feasible, const std::vector<int64_t>& scores) {
  size_t best = 0;
  for (size_t i = 1; i < feasible.size(); ++i) {
    if (scores[i] > scores[best]) best = i;
  }
  return feasible[best];
}

int64_t DotProductScore(const NodeState& node, const Pod& pod) {
  // dimExtMethod "merge", normMethod "max": [cpu left, GPU left] . [cpu, GPU] over the maxima,
  // halved; the larger the product, the lower the score.
  const double dot = (static_cast<double>(node.cpu_left) / kMaxSpecCpu) *
                         (static_cast<double>(pod.cpu_milli) / kMaxSpecCpu) +
                     (node.GpuLeftTotal() / kMaxSpecGpu) * (static_cast<double>(pod.TotalGpuMilli()) / kMaxSpecGpu);
  return static_cast<int64_t>(100.0 * (1.0 - dot / 2.0));
}

int64_t GpuClusteringScore(const NodeState& node, const Pod& pod) {
  if (pod.num_gpu == 0) return 0;
  const int tag = pod.IsFractional() ? 0 : pod.num_gpu;
  const int64_t used_part = 25 * (static_cast<int64_t>(kMaxSpecGpu) - node.GpuLeftTotal()) /
                            static_cast<int64_t>(kMaxSpecGpu);
  const int distinct = node.DistinctAffinities();
  if (node.affinity[static_cast<size_t>(tag)] > 0) return used_part + (distinct == 1 ? 75 : 50);
  return used_part + (distinct == 0 ? 25 : 0);
}

int64_t GpuPackingScore(const NodeState& node, const Pod& pod) {
  if (pod.TotalGpuMilli() <= 0) return 0;
  const int free = node.FullyFreeGpus();
  if (free == node.gpus) return std::max<int64_t>(100 / 3 - free, free);  // an idle node
  // The GPUs it would use: least room first (a stable sort by milli-GPU left).
  std::array<int, kMaxGpusPerNode> order{};
  for (int g = 0; g < node.gpus; ++g) order[static_cast<size_t>(g)] = g;
  std::stable_sort(order.begin(), order.begin() + node.gpus, [&](int a, int b) {
    return node.gpu_left[static_cast<size_t>(a)] < node.gpu_left[static_cast<size_t>(b)];
  });
  const GpuMask room = GpusWithRoom(node, pod);
  int needed = pod.num_gpu, free_used = 0;
  int64_t free_ratio_on_used = 0;
  for (int i = 0; i < node.gpus && needed > 0; ++i) {
    const int left = node.gpu_left[static_cast<size_t>(order[static_cast<size_t>(i)])];
    if ((room >> order[static_cast<size_t>(i)]) & 1) {
      --needed;
      free_used += left == kMilliPerGpu;
      free_ratio_on_used += int64_t{left} * 100 / kMilliPerGpu;
    }
  }
  if (free_used > 0) return std::max<int64_t>(100 / 2 - free_used, 100 / 3);  // opens free GPUs of a used node
  return std::max<int64_t>(100 - free_ratio_on_used / 10, 100 / 2);           // shares used GPUs
}

int64_t BestFitRawScore(const NodeState& node, const Pod& pod) {
  const double left = (static_cast<double>(node.cpu_left - pod.cpu_milli) / kMaxSpecCpu) * 0.5 +
                      (static_cast<double>(node.GpuLeftTotal() - pod.TotalGpuMilli()) / kMaxSpecGpu) * 0.5;
  return static_cast<int64_t>((1.0 - left) * 100.0);
}

namespace {

class RandomPolicy final : public Policy {
 public:
  Placement Choose(const Cluster& cluster, const Pod& pod, const std::vector<int>& feasible, Rng& rng) override {
    const int node = feasible[rng.Below(feasible.size())];
    const NodeState& state = cluster.nodes[static_cast<size_t>(node)];
    if (!pod.IsFractional()) return {node, FirstFreeGpus(state, pod.num_gpu)};
    // gpusel "random": uniformly among the GPUs with room.
    const GpuMask room = GpusWithRoom(state, pod);
    int pick = static_cast<int>(rng.Below(static_cast<uint64_t>(std::popcount(room))));
    for (int g = 0; g < state.gpus; ++g) {
      if (((room >> g) & 1) && pick-- == 0) return {node, GpuMask{1} << g};
    }
    return {node, 0};
  }
};

// A score per node, the highest wins, GPUs by best fit (gpusel "best").
template <int64_t (*Score)(const NodeState&, const Pod&), bool kNormalize>
class ScoredPolicy final : public Policy {
 public:
  Placement Choose(const Cluster& cluster, const Pod& pod, const std::vector<int>& feasible, Rng& rng) override {
    scores_.resize(feasible.size());
    for (size_t i = 0; i < feasible.size(); ++i)
      scores_[i] = Score(cluster.nodes[static_cast<size_t>(feasible[i])], pod);
    if (kNormalize) {  // the artifact's NormalizeScore: min-max onto 0..100, integer division
      const auto [lo, hi] = std::minmax_element(scores_.begin(), scores_.end());
      const int64_t low = *lo, range = *hi - *lo;
      for (int64_t& s : scores_) s = range == 0 ? 0 : (s - low) * 100 / range;
    }
    const int node = PickHighest(feasible, scores_);
    return {node, BestFitGpus(cluster.nodes[static_cast<size_t>(node)], pod)};
  }

 private:
  std::vector<int64_t> scores_;
};

}  // namespace

std::unique_ptr<Policy> MakeBaselinePolicy(std::string_view name) {
  if (name == "Random") return std::make_unique<RandomPolicy>();
  if (name == "DotProd") return std::make_unique<ScoredPolicy<DotProductScore, false>>();
  if (name == "GpuClustering") return std::make_unique<ScoredPolicy<GpuClusteringScore, false>>();
  if (name == "GpuPacking") return std::make_unique<ScoredPolicy<GpuPackingScore, false>>();
  if (name == "BestFit") return std::make_unique<ScoredPolicy<BestFitRawScore, true>>();
  return nullptr;
}

}  // namespace gpuslice::place
