// The policies operators reach for before any fragmentation model: FirstFit (the first node of
// the run's order that fits, the first GPU with room) and Spread (Kubernetes' LeastAllocated
// with GPUs beside CPU: the node left with the largest free share, the GPU with the most room).
// They bracket the others: first-fit packs by accident of order, spread keeps every node
// partly free, which is what strands GPUs next to big jobs.
#include <bit>

#include "place/policy.h"

namespace gpuslice::place {

GpuMask FirstGpusWithRoom(const NodeState& node, const Pod& pod) {
  if (pod.num_gpu == 0) return 0;
  if (!pod.IsFractional()) return FirstFreeGpus(node, pod.num_gpu);
  const GpuMask room = GpusWithRoom(node, pod);
  return room & (~room + 1);  // the lowest index
}

GpuMask RoomiestGpu(const NodeState& node, const Pod& pod) {
  if (pod.num_gpu == 0) return 0;
  if (!pod.IsFractional()) return FirstFreeGpus(node, pod.num_gpu);
  const GpuMask room = GpusWithRoom(node, pod);
  int best = -1;
  for (int g = 0; g < node.gpus; ++g) {
    if (((room >> g) & 1) &&
        (best < 0 || node.gpu_left[static_cast<size_t>(g)] > node.gpu_left[static_cast<size_t>(best)]))
      best = g;
  }
  return best < 0 ? 0 : GpuMask{1} << best;
}

int64_t SpreadScore(const NodeState& node, const Pod& pod) {
  // Free share after placement, CPU and GPU weighted alike, in 0..100 (LeastAllocated's form).
  const double cpu_free = node.cpu_capacity > 0 ? static_cast<double>(node.cpu_left - pod.cpu_milli) /
                                                      static_cast<double>(node.cpu_capacity)
                                                : 0.0;
  const double gpu_free = node.gpus > 0 ? static_cast<double>(node.GpuLeftTotal() - pod.TotalGpuMilli()) /
                                              (static_cast<double>(node.gpus) * kMilliPerGpu)
                                        : 0.0;
  return static_cast<int64_t>((cpu_free + gpu_free) / 2.0 * 100.0);
}

namespace {

class FirstFitPolicy final : public Policy {
 public:
  Placement Choose(const Cluster& cluster, const Pod& pod, const std::vector<int>& feasible, Rng&) override {
    const int node = feasible.front();
    return {node, FirstGpusWithRoom(cluster.nodes[static_cast<size_t>(node)], pod)};
  }
};

class SpreadPolicy final : public Policy {
 public:
  Placement Choose(const Cluster& cluster, const Pod& pod, const std::vector<int>& feasible, Rng&) override {
    scores_.resize(feasible.size());
    for (size_t i = 0; i < feasible.size(); ++i)
      scores_[i] = SpreadScore(cluster.nodes[static_cast<size_t>(feasible[i])], pod);
    const int node = PickHighest(feasible, scores_);
    return {node, RoomiestGpu(cluster.nodes[static_cast<size_t>(node)], pod)};
  }

 private:
  std::vector<int64_t> scores_;
};

}  // namespace

std::unique_ptr<Policy> MakeOperatorPolicy(std::string_view name) {
  if (name == "FirstFit") return std::make_unique<FirstFitPolicy>();
  if (name == "Spread") return std::make_unique<SpreadPolicy>();
  return nullptr;
}

}  // namespace gpuslice::place
