#include "place/tiers.h"

#include <fmt/format.h>

#include "place/rng.h"

namespace gpuslice::place {

std::optional<int> TierOfQos(const std::string& qos) {
  if (qos == "LS" || qos == "Guaranteed") return 1;
  if (qos == "BE" || qos == "Burstable") return 0;
  return std::nullopt;
}

std::string CheckQos(const std::string& pod_path, const std::vector<PodSpec>& pods) {
  for (const PodSpec& pod : pods) {
    if (pod.qos_column == 0) {
      return fmt::format("{}: --tiers qos needs the qos column, which this list lacks (the 11-column lists have it)",
                         pod_path);
    }
    if (!TierOfQos(pod.qos)) {
      return fmt::format("{}:{}:{}: qos '{}' is none of LS, Guaranteed (paid), BE, Burstable (free)", pod_path,
                         pod.line, pod.qos_column, pod.qos);
    }
  }
  return {};
}

void AssignRandomTiers(std::vector<Pod>& pods, double paid_fraction, uint64_t seed) {
  Rng rng(seed);
  for (Pod& pod : pods) pod.tier = static_cast<double>(rng.Below(1000000)) < paid_fraction * 1e6 ? 1 : 0;
}

int KeepTiersApart(std::vector<Pod>& pods, int score_classes) {
  for (Pod& pod : pods) {
    pod.keep_tier_apart = true;
    pod.score_class = pod.score_class * kTiers + pod.tier;
  }
  return score_classes * kTiers;
}

int MixedTierGpus(const NodeState& node) {
  int mixed = 0;
  for (int g = 0; g < node.gpus; ++g) {
    int tiers = 0;
    for (int16_t count : node.tier_pods[static_cast<size_t>(g)]) tiers += count > 0;
    mixed += tiers > 1;
  }
  return mixed;
}

}  // namespace gpuslice::place
