// Our policies: FGD's fragmentation gradient, measured exactly and with memory, plus terms for
// what that gradient does not see. Every term is in milli-GPU, FGD's unit; the lowest key wins,
// ties to the first node of the run's order (docs/placement.md describes each; the measurements
// that chose them are in docs/results/).
//
//   key(node) = delta_frag                        FGD's measure, exact (the artifact rounds it)
//             + w x residual                      best fit: the room the node keeps, as a share
//                                                 of the cluster's largest node (FGD-BF-G) or of
//                                                 128 cores and 8 GPUs (the artifact's constants)
//             + cpu_weight x delta starved        GPU pods: GPU the node's CPU can no longer feed
//                                                 at the workload's CPU per GPU (FGD-BF-C on), or
//                                                 at the cluster's where it has less (FGD-BF-G)
//             + hole_weight x delta dead holes    share holes only rare shares fill (FGD-BF-H on)
//             + scarcity x pod milli-GPU          a model the pinned pods need (FGD-BF-M, -G)
//             + open_cost                         an empty node (FGD-BF-M only)
//             + home_weight x homes lost          room multi-GPU pods to come will need (FGD-BF-G)
//
// Why exact and best fit: FGD's integer score ties placements within ~40 milli-GPU, and ties go
// to the first node of a random order, an accidental first fit that packs; packing on purpose
// keeps the gradient exact. Why the further terms: FGD's measure sees CPU only through whether
// each class still fits (so nodes run out of cores beside idle GPUs); it weighs a 120-milli hole
// as a 350 one; and it weighs classes by how many pods they have, so the few pods that only some
// nodes can hold (pinned by gpu_spec, or multi-GPU pods that need most of a node) lose those
// nodes to pods that could go anywhere. FGD-BF-M's fixed cost for an empty node kept whole nodes
// for big pods, but also kept pods off empty nodes without GPUs and, on clusters short of cores,
// crowded pods onto nodes whose cores they then stranded; FGD-BF-G counts instead the homes the
// big pods to come will lack (home_pressure.h), which is nothing while they have plenty,
// scales the residual with the cluster's own nodes (up to 16 GPUs), and counts GPUs as starved
// at no more CPU per GPU than the cluster has: a cluster short of CPU cannot feed every GPU
// whatever the placement, and at the workload's rate its nodes would be starved while empty and
// every pod charged alike on most of them, so that each term holds on any node.
#include <algorithm>
#include <limits>

#include "place/home_pressure.h"
#include "place/model_pressure.h"
#include "place/policy.h"
#include "place/score_cache.h"

namespace gpuslice::place {
namespace {

// Which terms a policy has, and their weights (see the key above).
struct Terms {
  double share_factor = 1.0;  // best-fit weight for shares, relative to the weight for other pods
  double cpu_weight = 0;
  bool cpu_term_for_cpu_only_pods = true;
  double hole_weight = 0;
  double scarcity_weight = 0;
  double open_cost = 0;
  double home_weight = 0;
  bool residual_of_largest_node = false;
  bool starved_at_cluster_rate = false;  // the CPU term at no more CPU per GPU than the cluster has
};

struct Choice {
  double delta = 0;
  GpuMask gpus = 0;
};

// What a share leaves on its GPU that no share the target workload asks for (but a rare few)
// would fill: a dead hole. `dead_below` is the threshold (DeadHoleThreshold); 0 turns it off.
int DeadHole(int left, int dead_below) { return left > 0 && left < dead_below ? left : 0; }

// The exact change in fragmentation; for a share, the GPU that changes it least (the tightest
// GPU among equals), counting `hole_weight` times the change in dead holes (FGD-BF-H).
Choice EvaluateExact(const NodeState& node, const Pod& pod, const TargetWorkload& target, double before,
                     double hole_weight, int dead_below) {
  Choice best;
  NodeState after = node;
  after.cpu_left -= pod.cpu_milli;
  after.memory_left -= pod.memory_mib;
  if (!pod.IsFractional()) {
    best.gpus = FirstFreeGpus(node, pod.num_gpu);
    for (int g = 0; g < node.gpus; ++g) {
      if ((best.gpus >> g) & 1) after.gpu_left[static_cast<size_t>(g)] -= static_cast<int16_t>(pod.gpu_milli);
    }
    best.delta = NodeFragmentation(after, target) - before;
    return best;
  }
  bool found = false;
  int best_left = 0;
  const GpuMask room = GpusWithRoom(node, pod);
  for (int g = 0; g < node.gpus; ++g) {
    const int16_t left = node.gpu_left[static_cast<size_t>(g)];
    if (!((room >> g) & 1)) continue;
    after.gpu_left[static_cast<size_t>(g)] = static_cast<int16_t>(left - pod.gpu_milli);
    const double delta = NodeFragmentation(after, target) - before +
                         hole_weight * (DeadHole(left - pod.gpu_milli, dead_below) - DeadHole(left, dead_below));
    after.gpu_left[static_cast<size_t>(g)] = left;
    if (!found || delta < best.delta - 1e-9 || (delta < best.delta + 1e-9 && left < best_left)) {
      best = Choice{delta, GpuMask{1} << g};
      best_left = left;
      found = true;
    }
  }
  return best;
}

// The room `node` keeps after `pod`, CPU and GPU alike, as shares of `cpu_scale` and `gpu_scale`.
double Residual(const NodeState& node, const Pod& pod, double cpu_scale, double gpu_scale) {
  return (static_cast<double>(node.cpu_left - pod.cpu_milli) / cpu_scale +
          static_cast<double>(node.GpuLeftTotal() - pod.TotalGpuMilli()) / gpu_scale) /
         2.0;
}

}  // namespace

double CpuPerGpu(const TargetWorkload& target) {
  double cpu = 0, gpu = 0;
  for (const TargetClass& c : target.classes) {
    if (c.num_gpu == 0) continue;
    cpu += c.weight * static_cast<double>(c.cpu_milli);
    gpu += c.weight * c.num_gpu * c.gpu_milli;
  }
  return gpu > 0 ? cpu / gpu : 0;
}

int DeadHoleThreshold(const TargetWorkload& target, double rare) {
  std::vector<std::pair<int, double>> shares;  // (milli-GPU, weight) of the share classes
  double total = 0;
  for (const TargetClass& c : target.classes) {
    if (c.num_gpu != 1 || c.gpu_milli >= kMilliPerGpu) continue;
    shares.emplace_back(c.gpu_milli, c.weight);
    total += c.weight;
  }
  std::sort(shares.begin(), shares.end());
  double below = 0;
  for (size_t i = 0; i < shares.size(); ++i) {
    below += shares[i].second;
    // The smallest size at which the shares that fit are no longer rare (the sizes alike summed).
    if (below >= rare * total && (i + 1 == shares.size() || shares[i + 1].first != shares[i].first)) {
      return shares[i].first;
    }
  }
  return 0;
}

double ClusterCpuPerGpu(const Cluster& cluster) {
  double cpu = 0, gpu = 0;
  for (const NodeState& node : cluster.nodes) {
    if (node.gpus == 0) continue;
    cpu += static_cast<double>(node.cpu_capacity);
    gpu += static_cast<double>(node.gpus) * kMilliPerGpu;
  }
  return gpu > 0 ? cpu / gpu : 0;
}

double CpuStarvedGpu(int64_t cpu_left, int64_t gpu_left, double cpu_per_gpu) {
  if (cpu_per_gpu <= 0) return 0;
  return std::max(0.0, static_cast<double>(gpu_left) - static_cast<double>(cpu_left) / cpu_per_gpu);
}

namespace {

TargetWorkload WithMemory(TargetWorkload target, bool memory_aware) {
  target.memory_aware = memory_aware;
  return target;
}

class FgdBestFitPolicy final : public Policy {
 public:
  FgdBestFitPolicy(const TargetWorkload& target, const Cluster& cluster, int score_classes,
                   const OurPolicyTuning& tuning, const Terms& terms)
      : terms_(terms),
        target_(WithMemory(target, tuning.memory_aware)),
        best_fit_weight_(tuning.best_fit_weight),
        cpu_per_gpu_(terms.starved_at_cluster_rate ? std::min(CpuPerGpu(target), ClusterCpuPerGpu(cluster))
                                                   : CpuPerGpu(target)),
        dead_below_(terms.hole_weight > 0 ? DeadHoleThreshold(target, kRareShareFraction) : 0),
        pinned_(terms.scarcity_weight > 0 ? PinnedShare(target, cluster) : std::vector<double>()),
        any_pinned_(std::any_of(pinned_.begin(), pinned_.end(), [](double p) { return p > 0; })),
        cache_(target_, cluster.nodes.size(), score_classes),
        homes_(target_, cluster, kHomeMinGpus) {
    for (const NodeState& node : cluster.nodes) {
      largest_cpu_ = std::max(largest_cpu_, static_cast<double>(node.cpu_capacity));
      largest_gpu_ = std::max(largest_gpu_, static_cast<double>(node.gpus) * kMilliPerGpu);
    }
  }

  Placement Choose(const Cluster& cluster, const Pod& pod, const std::vector<int>& feasible, Rng&) override {
    if (any_pinned_ && pod.num_gpu > 0) scarcity_ = ScarcityNow(pinned_, cluster, kScarcityCap);
    if (terms_.home_weight > 0) homes_.Update(cluster);
    Placement best;
    double best_key = std::numeric_limits<double>::infinity();
    for (int n : feasible) {
      const Choice& choice = cache_.Get(cluster, n, pod, [&](const NodeState& node, double before) {
        return EvaluateExact(node, pod, target_, before, terms_.hole_weight, dead_below_);
      });
      const double key = choice.delta + OtherTerms(cluster.nodes[static_cast<size_t>(n)], pod, choice.gpus);
      if (key < best_key - 1e-9) {
        best_key = key;
        best = Placement{n, choice.gpus};
      }
    }
    return best;
  }

 private:
  // Every term of the key but the fragmentation change, for `pod` on `node` taking `gpus`.
  double OtherTerms(const NodeState& node, const Pod& pod, GpuMask gpus) const {
    const double weight = best_fit_weight_ * (pod.IsFractional() ? terms_.share_factor : 1.0);
    double key = weight * (terms_.residual_of_largest_node ? Residual(node, pod, largest_cpu_, largest_gpu_)
                                                           : Residual(node, pod, kMaxSpecCpu, kMaxSpecGpu));
    if (terms_.cpu_weight > 0 && (terms_.cpu_term_for_cpu_only_pods || pod.num_gpu > 0)) {
      const int64_t gpu_left = node.GpuLeftTotal();
      key += terms_.cpu_weight *
             (CpuStarvedGpu(node.cpu_left - pod.cpu_milli, gpu_left - pod.TotalGpuMilli(), cpu_per_gpu_) -
              CpuStarvedGpu(node.cpu_left, gpu_left, cpu_per_gpu_));
    }
    if (terms_.open_cost > 0 && node.cpu_left == node.cpu_capacity && node.FullyFreeGpus() == node.gpus)
      key += terms_.open_cost;
    if (pod.num_gpu > 0 && node.model >= 0 && static_cast<size_t>(node.model) < scarcity_.size()) {
      key += terms_.scarcity_weight * static_cast<double>(pod.TotalGpuMilli()) *
             scarcity_[static_cast<size_t>(node.model)];
    }
    if (terms_.home_weight > 0 && homes_.AnyValued()) {
      NodeState after = node;
      Place(after, pod, gpus);
      key += terms_.home_weight * homes_.Cost(node, after);
    }
    return key;
  }

  const Terms terms_;
  const TargetWorkload target_;  // declared before cache_ and homes_, which refer to it
  const double best_fit_weight_;
  const double cpu_per_gpu_;          // milli-CPU per milli-GPU
  const int dead_below_;              // milli-GPU: smaller holes are dead (DeadHoleThreshold)
  const std::vector<double> pinned_;  // per model (PinnedShare)
  const bool any_pinned_;             // else scarcity_ stays empty: no model is scarcer than another
  std::vector<double> scarcity_;      // per model, for the GPU pod being placed (ScarcityNow)
  NodeScoreCache<Choice> cache_;
  HomePressure homes_;
  double largest_cpu_ = 1, largest_gpu_ = 1;  // the cluster's largest node, milli-CPU and milli-GPU
};

}  // namespace

std::unique_ptr<Policy> MakeOurPolicy(std::string_view name, const TargetWorkload& target, const Cluster& cluster,
                                      int score_classes, const OurPolicyTuning& tuning) {
  Terms terms;
  if (name == "FGD-BF") {
  } else if (name == "FGD-BF-S") {
    terms.share_factor = kShareBestFitFactor;
  } else if (name == "FGD-BF-C" || name == "FGD-BF-H") {
    terms.share_factor = kShareBestFitFactor;
    terms.cpu_weight = kCpuStarvedWeight;
    terms.hole_weight = name == "FGD-BF-H" ? kDeadHoleWeight : 0.0;
  } else if (name == "FGD-BF-M" || name == "FGD-BF-G") {
    terms.share_factor = kShareBestFitFactor;
    terms.cpu_weight = kCpuStarvedWeight;
    terms.cpu_term_for_cpu_only_pods = false;
    terms.hole_weight = kDeadHoleWeight;
    terms.scarcity_weight = kModelScarcityWeight;
    const bool general = name == "FGD-BF-G";
    terms.open_cost = general ? 0.0 : kOpenNodeCost;
    terms.home_weight = general ? kHomeWeight : 0.0;
    terms.residual_of_largest_node = general;
    // sabotage-point: place-starved-at-workload-rate
    terms.starved_at_cluster_rate = general;
  } else {
    return nullptr;
  }
  return std::make_unique<FgdBestFitPolicy>(target, cluster, score_classes, tuning, terms);
}

}  // namespace gpuslice::place
