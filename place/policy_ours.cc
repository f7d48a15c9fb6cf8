// Our policy, FGD-BF: FGD's fragmentation gradient, measured exactly, with best fit deciding
// between placements that fragment equally.
#include <bit>
#include <cmath>
#include <limits>

#include "place/policy.h"

namespace gpuslice::place {
namespace {

struct Choice {
  double delta = 0;
  double tie = 0;  // higher wins among equal deltas
  GpuMask gpus = 0;
};

// The exact change in fragmentation, GPU by GPU for a share; equal deltas go to the tightest GPU.
Choice EvaluateExact(const NodeState& node, const Pod& pod, const TargetWorkload& target, double before) {
  Choice best;
  NodeState after = node;
  after.cpu_left -= pod.cpu_milli;
  if (!pod.IsFractional()) {
    best.gpus = FirstFreeGpus(node, pod.num_gpu);
    for (int g = 0; g < node.gpus; ++g) {
      if ((best.gpus >> g) & 1) after.gpu_left[static_cast<size_t>(g)] -= static_cast<int16_t>(pod.gpu_milli);
    }
    best.delta = NodeFragmentation(after, target) - before;
  } else {
    bool found = false;
    for (int g = 0; g < node.gpus; ++g) {
      const int16_t left = node.gpu_left[static_cast<size_t>(g)];
      if (left < pod.gpu_milli) continue;
      after.gpu_left[static_cast<size_t>(g)] = static_cast<int16_t>(left - pod.gpu_milli);
      const double delta = NodeFragmentation(after, target) - before;
      after.gpu_left[static_cast<size_t>(g)] = left;
      const bool better = !found || delta < best.delta - 1e-9 ||
                          (delta < best.delta + 1e-9 && left < node.gpu_left[static_cast<size_t>(std::countr_zero(best.gpus))]);
      if (better) {
        best.delta = delta;
        best.gpus = GpuMask{1} << g;
        found = true;
      }
    }
  }
  best.tie = static_cast<double>(BestFitRawScore(node, pod));
  return best;
}

class FgdBestFitPolicy final : public Policy {
 public:
  FgdBestFitPolicy(const TargetWorkload& target, const Cluster& cluster, int score_classes)
      : target_(target),
        classes_(static_cast<size_t>(score_classes)),
        frag_(cluster.nodes.size()),
        cache_(cluster.nodes.size() * classes_) {}

  Placement Choose(const Cluster& cluster, const Pod& pod, const std::vector<int>& feasible, Rng& rng) override {
    int chosen = -1;
    const Choice* best = nullptr;
    uint64_t ties = 0;
    for (int n : feasible) {
      const Choice& c = Evaluate(cluster, n, pod);
      if (!best || c.delta < best->delta - 1e-6 || (c.delta < best->delta + 1e-6 && c.tie > best->tie)) {
        best = &c;
        chosen = n;
        ties = 1;
      } else if (c.delta < best->delta + 1e-6 && c.tie == best->tie && rng.Below(++ties) == 0) {
        best = &c;
        chosen = n;
      }
    }
    return {chosen, best->gpus};
  }

 private:
  struct NodeFrag {
    uint32_t version = std::numeric_limits<uint32_t>::max();
    double frag = 0;
  };
  struct Cached {
    uint32_t version = std::numeric_limits<uint32_t>::max();
    Choice choice;
  };

  const Choice& Evaluate(const Cluster& cluster, int node_index, const Pod& pod) {
    const NodeState& node = cluster.nodes[static_cast<size_t>(node_index)];
    Cached& cached = cache_[static_cast<size_t>(node_index) * classes_ + static_cast<size_t>(pod.score_class)];
    if (cached.version != node.version) {
      NodeFrag& frag = frag_[static_cast<size_t>(node_index)];
      if (frag.version != node.version) frag = NodeFrag{node.version, NodeFragmentation(node, target_)};
      cached = Cached{node.version, EvaluateExact(node, pod, target_, frag.frag)};
    }
    return cached.choice;
  }

  const TargetWorkload& target_;
  size_t classes_;
  std::vector<NodeFrag> frag_;
  std::vector<Cached> cache_;
};

}  // namespace

std::unique_ptr<Policy> MakeOurPolicy(std::string_view name, const TargetWorkload& target, const Cluster& cluster,
                                      int score_classes) {
  if (name == "FGD-BF") return std::make_unique<FgdBestFitPolicy>(target, cluster, score_classes);
  return nullptr;
}

}  // namespace gpuslice::place
