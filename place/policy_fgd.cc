// FGD (the artifact's FGDScore + its GPU choice) and the policy registry. A node's score for a
// pod depends only on the node's state and the pod's (cpu, gpu_milli, num_gpu), so each is cached
// per node and score class until the node changes (its version): between two pods only one node
// changes, which turns FGD's ~1200 fragmentation evaluations per pod into about one.
#include <cmath>
#include <limits>

#include "place/policy.h"

namespace gpuslice::place {

std::unique_ptr<Policy> MakeBaselinePolicy(std::string_view name);
std::unique_ptr<Policy> MakeOurPolicy(std::string_view name, const TargetWorkload& target, const Cluster& cluster,
                                      int score_classes, const OurPolicyTuning& tuning);

namespace {

int64_t SigmoidScore(double delta) {
  return static_cast<int64_t>(1.0 / (1.0 + std::exp(delta / 1000.0)) * 100.0);
}

}  // namespace

FgdChoice FgdEvaluate(const NodeState& node, const Pod& pod, const TargetWorkload& target, double frag_before) {
  FgdChoice best;
  NodeState after = node;
  after.cpu_left -= pod.cpu_milli;
  if (!pod.IsFractional()) {
    const GpuMask gpus = FirstFreeGpus(node, pod.num_gpu);
    for (int g = 0; g < node.gpus; ++g) {
      if ((gpus >> g) & 1) after.gpu_left[static_cast<size_t>(g)] -= static_cast<int16_t>(pod.gpu_milli);
    }
    best.delta = NodeFragmentation(after, target) - frag_before;
    best.score = SigmoidScore(best.delta);
    best.gpus = gpus;
    return best;
  }
  bool found = false;
  for (int g = 0; g < node.gpus; ++g) {
    const int16_t left = node.gpu_left[static_cast<size_t>(g)];
    if (left < pod.gpu_milli) continue;
    after.gpu_left[static_cast<size_t>(g)] = static_cast<int16_t>(left - pod.gpu_milli);
    const double delta = NodeFragmentation(after, target) - frag_before;
    after.gpu_left[static_cast<size_t>(g)] = left;
    const int64_t score = SigmoidScore(delta);
    if (!found || score > best.score) {  // the first GPU of the highest (integer) score
      best = FgdChoice{delta, score, GpuMask{1} << g};
      found = true;
    }
  }
  return best;
}

namespace {

class FgdPolicy final : public Policy {
 public:
  FgdPolicy(const TargetWorkload& target, const Cluster& cluster, int score_classes)
      : target_(target),
        classes_(static_cast<size_t>(score_classes)),
        frag_(cluster.nodes.size()),
        cache_(cluster.nodes.size() * classes_) {}

  Placement Choose(const Cluster& cluster, const Pod& pod, const std::vector<int>& feasible, Rng& rng) override {
    scores_.resize(feasible.size());
    for (size_t i = 0; i < feasible.size(); ++i) scores_[i] = Evaluate(cluster, feasible[i], pod).score;
    const int node = PickHighest(feasible, scores_);
    return {node, Evaluate(cluster, node, pod).gpus};
  }

 private:
  struct NodeFrag {
    uint32_t version = std::numeric_limits<uint32_t>::max();
    double frag = 0;
  };
  struct Cached {
    uint32_t version = std::numeric_limits<uint32_t>::max();
    FgdChoice choice;
  };

  const FgdChoice& Evaluate(const Cluster& cluster, int node_index, const Pod& pod) {
    const NodeState& node = cluster.nodes[static_cast<size_t>(node_index)];
    Cached& cached = cache_[static_cast<size_t>(node_index) * classes_ + static_cast<size_t>(pod.score_class)];
    if (cached.version != node.version) {
      NodeFrag& frag = frag_[static_cast<size_t>(node_index)];
      if (frag.version != node.version) frag = NodeFrag{node.version, NodeFragmentation(node, target_)};
      cached = Cached{node.version, FgdEvaluate(node, pod, target_, frag.frag)};
    }
    return cached.choice;
  }

  const TargetWorkload& target_;
  size_t classes_;
  std::vector<NodeFrag> frag_;
  std::vector<Cached> cache_;
  std::vector<int64_t> scores_;
};

}  // namespace

const std::vector<std::string>& PolicyNames() {
  static const std::vector<std::string> kNames = {"Random", "DotProd", "GpuClustering", "GpuPacking",
                                                  "BestFit", "FGD", "FGD-BF"};
  return kNames;
}

std::unique_ptr<Policy> MakePolicy(std::string_view name, const TargetWorkload& target, const Cluster& cluster,
                                   int score_classes, const OurPolicyTuning& tuning) {
  if (auto baseline = MakeBaselinePolicy(name)) return baseline;
  if (name == "FGD") return std::make_unique<FgdPolicy>(target, cluster, score_classes);
  return MakeOurPolicy(name, target, cluster, score_classes, tuning);
}

}  // namespace gpuslice::place
