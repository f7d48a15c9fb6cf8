// FGD (the artifact's FGDScore + its GPU choice) and the policy registry.
#include <cmath>

#include "place/policy.h"
#include "place/score_cache.h"

namespace gpuslice::place {

std::unique_ptr<Policy> MakeBaselinePolicy(std::string_view name);
std::unique_ptr<Policy> MakeOperatorPolicy(std::string_view name);
std::unique_ptr<Policy> MakeOurPolicy(std::string_view name, const TargetWorkload& target, const Cluster& cluster,
                                      int score_classes, const OurPolicyTuning& tuning);

namespace {

int64_t SigmoidScore(double delta) { return static_cast<int64_t>(1.0 / (1.0 + std::exp(delta / 1000.0)) * 100.0); }

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
  const GpuMask room = GpusWithRoom(node, pod);
  for (int g = 0; g < node.gpus; ++g) {
    const int16_t left = node.gpu_left[static_cast<size_t>(g)];
    if (!((room >> g) & 1)) continue;
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
      : target_(target), cache_(target, cluster.nodes.size(), score_classes) {}

  Placement Choose(const Cluster& cluster, const Pod& pod, const std::vector<int>& feasible, Rng&) override {
    scores_.resize(feasible.size());
    for (size_t i = 0; i < feasible.size(); ++i) scores_[i] = Evaluate(cluster, feasible[i], pod).score;
    const int node = PickHighest(feasible, scores_);
    return {node, Evaluate(cluster, node, pod).gpus};
  }

 private:
  const FgdChoice& Evaluate(const Cluster& cluster, int node, const Pod& pod) {
    return cache_.Get(cluster, node, pod,
                      [&](const NodeState& state, double before) { return FgdEvaluate(state, pod, target_, before); });
  }

  const TargetWorkload& target_;
  NodeScoreCache<FgdChoice> cache_;
  std::vector<int64_t> scores_;
};

}  // namespace

const std::vector<std::string>& PolicyNames() {
  static const std::vector<std::string> kNames = {"Random",   "DotProd",  "GpuClustering", "GpuPacking", "BestFit",
                                                  "FirstFit", "Spread",   "FGD",           "FGD-BF",     "FGD-BF-S",
                                                  "FGD-BF-C", "FGD-BF-H", "FGD-BF-M",      "FGD-BF-G"};
  return kNames;
}

std::unique_ptr<Policy> MakePolicy(std::string_view name, const TargetWorkload& target, const Cluster& cluster,
                                   int score_classes, const OurPolicyTuning& tuning) {
  if (auto baseline = MakeBaselinePolicy(name)) return baseline;
  if (auto simple = MakeOperatorPolicy(name)) return simple;
  if (name == "FGD") return std::make_unique<FgdPolicy>(target, cluster, score_classes);
  return MakeOurPolicy(name, target, cluster, score_classes, tuning);
}

}  // namespace gpuslice::place
