// Tiers: free and paid pods, from the trace's qos or at random, and the rule that two tiers
// never share a physical GPU: a property over every policy on random clusters, with the rule off
// as the control (it does mix them).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "place/experiment.h"
#include "place/policy.h"
#include "place/rng.h"
#include "place/tiers.h"
#include "place_test_files.h"

namespace gpuslice::place {
namespace {

using ::testing::HasSubstr;

TEST(PlaceTiers, QosNamesTheTier) {
  EXPECT_EQ(TierOfQos("LS"), 1);
  EXPECT_EQ(TierOfQos("Guaranteed"), 1);
  EXPECT_EQ(TierOfQos("BE"), 0);
  EXPECT_EQ(TierOfQos("Burstable"), 0);
  EXPECT_EQ(TierOfQos("gold"), std::nullopt);
  PodSpec pod;
  pod.line = 3;
  pod.qos = "gold";
  pod.qos_column = 7;
  EXPECT_EQ(CheckQos("pods.csv", {pod}),
            "pods.csv:3:7: qos 'gold' is none of LS, Guaranteed (paid), BE, Burstable (free)");
  pod.qos_column = 0;
  EXPECT_THAT(CheckQos("pods.csv", {pod}), HasSubstr("needs the qos column"));
}

TEST(PlaceTiers, ApartAShareMayNotJoinAGpuOfTheOtherTier) {
  NodeState node;
  node.cpu_left = node.cpu_capacity = 32000;
  node.memory_left = 65536;
  node.model = 0;
  node.gpus = 2;
  node.gpu_left = {1000, 1000};
  Pod free_share;
  free_share.cpu_milli = 1000;
  free_share.num_gpu = 1;
  free_share.gpu_milli = 300;
  Place(node, free_share, GpuMask{0b01});
  Pod paid = free_share;
  paid.tier = 1;
  EXPECT_EQ(GpusWithRoom(node, paid), GpuMask{0b11});  // the rule off: both have room
  paid.keep_tier_apart = true;
  EXPECT_EQ(GpusWithRoom(node, paid), GpuMask{0b10});
  free_share.keep_tier_apart = true;
  EXPECT_EQ(GpusWithRoom(node, free_share), GpuMask{0b11});  // its own tier may join
  Place(node, paid, GpuMask{0b10});
  paid.keep_tier_apart = false;
  Place(node, paid, GpuMask{0b01});
  EXPECT_EQ(MixedTierGpus(node), 1);
  Unplace(node, paid, GpuMask{0b01});
  EXPECT_EQ(MixedTierGpus(node), 0);
}

// A random cluster of small nodes and a workload of mostly shares, each pod free or paid.
Experiment RandomTieredExperiment(uint64_t seed) {
  Rng rng(seed);
  std::vector<NodeSpec> nodes;
  for (int n = 0; n < 6; ++n) {
    nodes.push_back({"n" + std::to_string(n), 32000, 131072, 1 + static_cast<int>(rng.Below(4)), "T4"});
  }
  std::vector<PodSpec> pods;
  const int shares[] = {100, 250, 300, 500, 700, 1000};
  for (int p = 0; p < 40; ++p) {
    PodSpec pod;
    pod.name = "p" + std::to_string(p);
    pod.cpu_milli = 1000;
    pod.memory_mib = 1024;
    pod.num_gpu = rng.Below(8) == 0 ? 2 : 1;
    pod.gpu_milli = pod.num_gpu == 2 ? 1000 : shares[rng.Below(6)];
    pod.qos = rng.Below(2) ? "LS" : "BE";
    pod.qos_column = 7;
    pods.push_back(pod);
  }
  return PrepareExperiment(nodes, pods);
}

TEST(PlaceTiers, NoPolicyEverMixesTiersOnAGpuWhenTheyAreKeptApart) {
  int mixed_without_rule = 0;
  for (const std::string& policy : PolicyNames()) {
    for (uint64_t seed = 1; seed <= 8; ++seed) {
      const Experiment experiment = RandomTieredExperiment(seed);
      for (bool gangs : {false, true}) {
        RunOptions options;
        options.tiers = true;
        options.gangs = gangs;
        options.tiers_apart = true;
        const RunSeries apart = RunOne(experiment, policy, seed, options);
        EXPECT_EQ(apart.mixed_tier_gpus_max, 0) << policy << " seed " << seed << (gangs ? " gangs" : "");
        EXPECT_GT(apart.paid_pods, 0);
        EXPECT_GT(apart.free_pods, 0);
        options.tiers_apart = false;  // the control
        mixed_without_rule += RunOne(experiment, policy, seed, options).mixed_tier_gpus_max > 0;
      }
    }
  }
  EXPECT_GT(mixed_without_rule, static_cast<int>(PolicyNames().size()) * 8);  // most runs mix without it
}

TEST(PlaceTiers, RandomTiersFollowTheFractionAndTheSeed) {
  const Experiment experiment = RandomTieredExperiment(1);
  const RunPods all_paid = PodsForRun(experiment, false, 1.0, 3), none_paid = PodsForRun(experiment, false, 0.0, 3);
  for (size_t i = 0; i < all_paid.pods.size(); ++i) {
    EXPECT_EQ(all_paid.pods[i].tier, 1);
    EXPECT_EQ(none_paid.pods[i].tier, 0);
  }
  const RunPods a = PodsForRun(experiment, true, 0.5, 3), b = PodsForRun(experiment, true, 0.5, 3),
                c = PodsForRun(experiment, true, 0.5, 4);
  int same = 0, paid = 0;
  for (size_t i = 0; i < a.pods.size(); ++i) {
    EXPECT_EQ(a.pods[i].tier, b.pods[i].tier);
    EXPECT_EQ(a.pods[i].score_class % kTiers, a.pods[i].tier);  // classes split by tier
    EXPECT_TRUE(a.pods[i].keep_tier_apart);
    same += a.pods[i].tier == c.pods[i].tier;
    paid += a.pods[i].tier;
  }
  EXPECT_LT(same, static_cast<int>(a.pods.size()));  // another seed, another draw
  EXPECT_GT(paid, 8);
  EXPECT_LT(paid, 32);
  EXPECT_EQ(a.score_classes, experiment.score_classes * kTiers);
}

}  // namespace
}  // namespace gpuslice::place
