// Tiers: every pod is free (0) or paid (1), from the trace's qos column (LS and Guaranteed are
// paid; BE, best effort, and Burstable are free) or at random for an experiment. Kept apart,
// pods of two tiers never share a physical GPU: a share may go only on a GPU that holds no pod
// of the other tier (GpusWithRoom); whole GPUs are free of pods by definition. Why: a free
// tenant's bursts are a paid tenant's jitter when they share one GPU's time.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "place/cluster.h"

namespace gpuslice::place {

// 1 paid (LS, Guaranteed), 0 free (BE, Burstable); none for anything else.
std::optional<int> TierOfQos(const std::string& qos);
// Empty when every pod's qos names a tier; else "file:line:column: ..." for the first that does not.
std::string CheckQos(const std::string& pod_path, const std::vector<PodSpec>& pods);
// Each pod paid with probability `paid_fraction`, drawn in order from `seed`.
void AssignRandomTiers(std::vector<Pod>& pods, double paid_fraction, uint64_t seed);
// The pods with the rule on; their score classes split by tier (a class's GPUs with room now
// depend on its tier, and the policies cache per class). Returns the new number of classes.
int KeepTiersApart(std::vector<Pod>& pods, int score_classes);
// GPUs on `node` holding pods of more than one tier.
int MixedTierGpus(const NodeState& node);

}  // namespace gpuslice::place
