// Each policy's choice on hand-made clusters, against scores and answers computed by hand from
// the FGD artifact's formulas (the comments show the arithmetic).
#include <gtest/gtest.h>

#include <set>

#include "place/cluster.h"
#include "place/fragmentation.h"
#include "place/model_pressure.h"
#include "place/policy.h"

namespace gpuslice::place {
namespace {

NodeState MakeNode(int64_t cpu, int64_t memory, int model, std::vector<int> gpu_left) {
  NodeState node;
  node.cpu_left = node.cpu_capacity = cpu;
  node.memory_left = memory;
  node.model = model;
  node.gpus = static_cast<int>(gpu_left.size());
  for (size_t g = 0; g < gpu_left.size(); ++g) node.gpu_left[g] = static_cast<int16_t>(gpu_left[g]);
  return node;
}

Pod MakePod(int64_t cpu, int num_gpu, int gpu_milli, int score_class = 0) {
  Pod pod;
  pod.cpu_milli = cpu;
  pod.memory_mib = 1024;
  pod.num_gpu = num_gpu;
  pod.gpu_milli = gpu_milli;
  pod.score_class = score_class;
  return pod;
}

// Two equally popular classes: a 500 milli share and a whole GPU, each with 1 core.
TargetWorkload HalfShareHalfWhole() {
  TargetWorkload target;
  target.classes = {{1000, 500, 1, ~uint64_t{0}, 0, 0.5}, {1000, 1000, 1, ~uint64_t{0}, 0, 0.5}};
  return target;
}

Placement ChoosePlacement(const std::string& policy_name, Cluster& cluster, const Pod& pod, uint64_t seed = 1,
                          const TargetWorkload& target = HalfShareHalfWhole()) {
  auto policy = MakePolicy(policy_name, target, cluster, 4);
  EXPECT_NE(policy, nullptr) << policy_name;
  std::vector<int> feasible;
  for (size_t n = 0; n < cluster.nodes.size(); ++n) {
    if (Fits(cluster.nodes[n], pod)) feasible.push_back(static_cast<int>(n));
  }
  EXPECT_FALSE(feasible.empty());
  Rng rng(seed);
  return policy->Choose(cluster, pod, feasible, rng);
}

TEST(PlacePolicy, FilterChecksModelCpuMemoryAndGpus) {
  NodeState node = MakeNode(16000, 32768, /*model=*/1, {300, 1000});
  Pod pod = MakePod(8000, 1, 500);
  EXPECT_TRUE(Fits(node, pod));
  pod.model_mask = uint64_t{1} << 0;  // only model 0
  EXPECT_FALSE(Fits(node, pod));
  pod.model_mask = (uint64_t{1} << 0) | (uint64_t{1} << 1);
  EXPECT_TRUE(Fits(node, pod));
  pod.cpu_milli = 16001;
  EXPECT_FALSE(Fits(node, pod));
  pod.cpu_milli = 8000;
  pod.memory_mib = 40000;
  EXPECT_FALSE(Fits(node, pod));
  pod.memory_mib = 1024;
  EXPECT_FALSE(Fits(node, MakePod(1000, 2, 1000)));                           // only one GPU wholly free
  EXPECT_TRUE(Fits(node, MakePod(1000, 1, 300)));                             // the 300 left is enough for a 300 share
  EXPECT_FALSE(Fits(MakeNode(16000, 32768, -1, {}), MakePod(1000, 1, 100)));  // no GPUs
  EXPECT_TRUE(Fits(MakeNode(16000, 32768, -1, {}), MakePod(1000, 0, 0)));
}

TEST(PlacePolicy, BestFitGpuIsTheTightestShareOrTheFirstFreeGpus) {
  const NodeState node = MakeNode(64000, 65536, 0, {1000, 400, 1000, 250, 1000});
  EXPECT_EQ(BestFitGpus(node, MakePod(1000, 1, 200)), GpuMask{1} << 3);  // 250 is tightest
  EXPECT_EQ(BestFitGpus(node, MakePod(1000, 1, 300)), GpuMask{1} << 1);  // 400
  EXPECT_EQ(BestFitGpus(node, MakePod(1000, 2, 1000)), (GpuMask{1} << 0) | (GpuMask{1} << 2));
}

TEST(PlacePolicy, NvlinkIslandChoiceKeepsAMultiGpuPodOnOneIsland) {
  // Islands {0-3} and {4-7}; GPUs 1 and 2 are taken: free 0, 3 | 4, 5, 6, 7.
  const NodeState node = MakeNode(96000, 393216, 0, {1000, 0, 0, 1000, 1000, 1000, 1000, 1000});
  const GpuMask first_free = FirstFreeGpus(node, 3);  // the artifact: 0, 3, 4 across islands
  EXPECT_EQ(first_free, GpuMask{0b11001});
  EXPECT_EQ(PairsOnOneIsland(first_free, 4), 1);              // only 0-3
  EXPECT_EQ(IslandFreeGpus(node, 3, 4), GpuMask{0b1110000});  // 4, 5, 6
  EXPECT_EQ(PairsOnOneIsland(IslandFreeGpus(node, 3, 4), 4), 3);
  EXPECT_EQ(IslandFreeGpus(node, 2, 4), GpuMask{0b1001});         // the fullest island that fits: 0, 3
  EXPECT_EQ(IslandFreeGpus(node, 5, 4), FirstFreeGpus(node, 5));  // no island holds 5
}

TEST(PlacePolicy, PairBandwidthCountsEachPairOnItsLink) {
  // 0, 3, 4 with islands of 4: the pair 0-3 on NVLink, 0-4 and 3-4 across on PCIe at 0.1.
  EXPECT_DOUBLE_EQ(RelativePairBandwidth(0b11001, 4, 0.1), (1 + 0.1 + 0.1) / 3);
  EXPECT_DOUBLE_EQ(RelativePairBandwidth(0b1110000, 4, 0.1), 1.0);
  // All 8 GPUs, islands of 4: 12 of the 28 pairs on NVLink.
  EXPECT_DOUBLE_EQ(RelativePairBandwidth(0xff, 4, 0.1), (12 + 16 * 0.1) / 28);
  EXPECT_DOUBLE_EQ(RelativePairBandwidth(0b1, 4, 0.1), 1.0);  // one GPU: no pair
}

TEST(PlacePolicy, TiesGoToTheFirstNodeInTheRunsOrder) {
  EXPECT_EQ(PickHighest({4, 2, 7, 9}, {10, 30, 30, 5}), 2);
  EXPECT_EQ(PickHighest({4, 2, 7, 9}, {10, 30, 31, 5}), 7);
}

TEST(PlacePolicy, DotProductPrefersTheSmallestProduct) {
  Cluster cluster;
  cluster.nodes = {MakeNode(64000, 131072, 0, {1000, 1000, 1000, 1000}), MakeNode(32000, 65536, 0, {1000, 1000})};
  const Pod pod = MakePod(8000, 1, 1000);
  // Node 0: (64000/128000)(8000/128000) + (4000/8000)(1000/8000) = 0.09375 -> int(100 * (1 - 0.046875)) = 95.
  EXPECT_EQ(DotProductScore(cluster.nodes[0], pod), 95);
  // Node 1: 0.25 * 0.0625 + 0.25 * 0.125 = 0.046875 -> int(100 * (1 - 0.0234375)) = 97.
  EXPECT_EQ(DotProductScore(cluster.nodes[1], pod), 97);
  const Placement placement = ChoosePlacement("DotProd", cluster, pod);
  EXPECT_EQ(placement.node, 1);
  EXPECT_EQ(placement.gpus, GpuMask{1});
}

TEST(PlacePolicy, GpuClusteringJoinsPodsOfTheSameKind) {
  Cluster cluster;
  cluster.nodes = {MakeNode(64000, 131072, 0, {1000, 1000, 1000, 1000}), MakeNode(32000, 65536, 0, {1000, 1000}),
                   MakeNode(16000, 32768, 0, {0, 1000})};
  Place(cluster.nodes[1], MakePod(1000, 1, 500), GpuMask{1});  // a share pod: GPU 0 has 500 left
  cluster.nodes[2].affinity[1] = 1;                            // a whole-GPU pod sits on node 2
  const Pod share = MakePod(1000, 1, 300);
  EXPECT_EQ(GpuClusteringScore(cluster.nodes[0], share), 25 * 4000 / 8000 + 25);  // idle node: 37
  EXPECT_EQ(GpuClusteringScore(cluster.nodes[1], share), 25 * 6500 / 8000 + 75);  // only shares: 95
  EXPECT_EQ(GpuClusteringScore(cluster.nodes[2], share), 25 * 7000 / 8000 + 0);   // other kind: 21
  EXPECT_EQ(GpuClusteringScore(cluster.nodes[0], MakePod(1000, 0, 0)), 0);
  const Placement placement = ChoosePlacement("GpuClustering", cluster, share);
  EXPECT_EQ(placement.node, 1);
  EXPECT_EQ(placement.gpus, GpuMask{1});  // best fit: the 500 left, not the free GPU
}

TEST(PlacePolicy, GpuPackingPrefersUsedGpusThenUsedNodes) {
  Cluster cluster;
  cluster.nodes = {MakeNode(64000, 131072, 0, {1000, 1000, 1000, 1000}), MakeNode(16000, 32768, 0, {0, 1000}),
                   MakeNode(32000, 65536, 0, {500, 1000})};
  const Pod share = MakePod(1000, 1, 300);
  EXPECT_EQ(GpuPackingScore(cluster.nodes[0], share), 29);  // idle node: max(33 - 4, 4)
  EXPECT_EQ(GpuPackingScore(cluster.nodes[1], share), 49);  // opens one free GPU: max(50 - 1, 33)
  EXPECT_EQ(GpuPackingScore(cluster.nodes[2], share), 95);  // shares a used GPU: 100 - (500*100/1000)/10
  EXPECT_EQ(ChoosePlacement("GpuPacking", cluster, share).node, 2);
  // A whole GPU cannot share: the used node with a free GPU (49) beats the idle node (29).
  EXPECT_EQ(ChoosePlacement("GpuPacking", cluster, MakePod(1000, 1, 1000)).node, 1);
}

TEST(PlacePolicy, BestFitNormalisesScoresAndTakesTheTightestNode) {
  Cluster cluster;
  cluster.nodes = {MakeNode(32000, 65536, 0, {1000, 1000}), MakeNode(64000, 131072, 0, {1000, 1000, 1000, 1000}),
                   MakeNode(16000, 32768, 0, {1000, 1000})};
  const Pod pod = MakePod(8000, 1, 1000);
  // Left after, halves of cpu/128000 and GPU/8000: 0.15625, 0.40625, 0.09375 -> 84, 59, 90.
  EXPECT_EQ(BestFitRawScore(cluster.nodes[0], pod), 84);
  EXPECT_EQ(BestFitRawScore(cluster.nodes[1], pod), 59);
  EXPECT_EQ(BestFitRawScore(cluster.nodes[2], pod), 90);
  EXPECT_EQ(ChoosePlacement("BestFit", cluster, pod).node, 2);
}

TEST(PlacePolicy, RandomPicksOnlyFeasibleNodesAndDependsOnTheSeed) {
  Cluster cluster;
  cluster.nodes = {MakeNode(32000, 65536, 0, {1000, 1000}), MakeNode(4000, 65536, 0, {1000, 1000}),
                   MakeNode(32000, 65536, 0, {600, 700, 1000}), MakeNode(32000, 65536, 0, {1000})};
  const Pod pod = MakePod(8000, 1, 500);  // node 1 lacks CPU
  std::set<int> nodes;
  std::set<GpuMask> gpus_on_node_2;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    const Placement p = ChoosePlacement("Random", cluster, pod, seed);
    EXPECT_NE(p.node, 1);
    nodes.insert(p.node);
    if (p.node == 2) gpus_on_node_2.insert(p.gpus);
    const Placement again = ChoosePlacement("Random", cluster, pod, seed);
    EXPECT_EQ(again.node, p.node);
    EXPECT_EQ(again.gpus, p.gpus);
  }
  EXPECT_EQ(nodes, (std::set<int>{0, 2, 3}));
  EXPECT_EQ(gpus_on_node_2.size(), 3u);  // any GPU with room, at random
}

TEST(PlacePolicy, FgdScoresTheChangeInFragmentation) {
  const TargetWorkload target = HalfShareHalfWhole();
  // GPUs left {300, 600, 1000}; before: 500-class sees 300 as fragment (0.5*300), the whole-GPU
  // class sees 900 (0.5*900): 600. A 300 share on GPU 0 -> {0, 600, 1000}: 0 + 0.5*600 = 300,
  // delta -300, int(sigmoid(0.3) * 100) = 57; on GPU 1: delta 0 -> 50; on GPU 2: +350 -> 41.
  const NodeState node = MakeNode(32000, 65536, 0, {300, 600, 1000});
  EXPECT_DOUBLE_EQ(NodeFragmentation(node, target), 600);
  const FgdChoice choice = FgdEvaluate(node, MakePod(1000, 1, 300), target, 600);
  EXPECT_DOUBLE_EQ(choice.delta, -300);
  EXPECT_EQ(choice.score, 57);
  EXPECT_EQ(choice.gpus, GpuMask{1});
}

TEST(PlacePolicy, FgdFillsTheFragmentRatherThanAFreshGpu) {
  Cluster cluster;
  // Node 0 idle: a 500 share leaves {500, 1000}: +250 (score 43). Node 1 {500, 0}: 250 before
  // (the whole-GPU class cannot run), 0 after: -250 (score 56).
  cluster.nodes = {MakeNode(32000, 65536, 0, {1000, 1000}), MakeNode(32000, 65536, 0, {500, 0})};
  const Pod share = MakePod(1000, 1, 500);
  EXPECT_EQ(FgdEvaluate(cluster.nodes[0], share, HalfShareHalfWhole(), 0).score, 43);
  EXPECT_EQ(FgdEvaluate(cluster.nodes[1], share, HalfShareHalfWhole(), 250).score, 56);
  const Placement placement = ChoosePlacement("FGD", cluster, share);
  EXPECT_EQ(placement.node, 1);
  EXPECT_EQ(placement.gpus, GpuMask{1});
}

TEST(PlacePolicy, OursBreaksFgdsRoundedTiesByBestFit) {
  Cluster cluster;
  // Both idle: a 500 share changes fragmentation by +250 on either, so FGD's integer scores tie
  // and it takes the first node (8 GPUs). Ours adds 100 * residual: node 0 leaves
  // (95000/128000 + 7500/8000)/2 = 0.84, node 1 (31000/128000 + 1500/8000)/2 = 0.21: node 1.
  cluster.nodes = {MakeNode(96000, 393216, 0, {1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000}),
                   MakeNode(32000, 65536, 0, {1000, 1000})};
  const Pod share = MakePod(1000, 1, 500);
  EXPECT_EQ(ChoosePlacement("FGD", cluster, share).node, 0);
  const Placement ours = ChoosePlacement("FGD-BF", cluster, share);
  EXPECT_EQ(ours.node, 1);
  EXPECT_EQ(ours.gpus, GpuMask{1});
}

TEST(PlacePolicy, OursTakesTheLowerExactGradientOverBestFit) {
  Cluster cluster;
  // Node 0 is the tighter fit, but there a 500 share opens a fresh GPU (+250); on node 1 it
  // fills a 500 fragment (-250): 500 milli-GPU of fragmentation outweighs 100 * residual.
  cluster.nodes = {MakeNode(16000, 65536, 0, {1000, 1000}), MakeNode(96000, 393216, 0, {500, 0, 1000, 1000})};
  EXPECT_EQ(ChoosePlacement("FGD-BF", cluster, MakePod(1000, 1, 500)).node, 1);
}

TEST(PlacePolicy, OursForSharesWeighsBestFitLess) {
  Cluster cluster;
  // A 500 share: on node 0 it fills the GPU with 600 left, fragmentation 300 -> 100 (-200), and
  // leaves residual ((15000/128000) + (100/8000))/2 = 0.065; on node 1 the GPU with 550 left,
  // 275 -> 50 (-225), residual ((71000/128000) + (3050/8000))/2 = 0.468. FGD-BF: -200 + 6.5 <
  // -225 + 46.8, node 0; FGD-BF-S (0.4 of the weight for shares): -200 + 2.6 > -225 + 18.7, node 1.
  cluster.nodes = {MakeNode(16000, 65536, 0, {600}), MakeNode(72000, 393216, 0, {550, 1000, 1000, 1000})};
  const Pod share = MakePod(1000, 1, 500);
  EXPECT_EQ(ChoosePlacement("FGD-BF", cluster, share).node, 0);
  const Placement light = ChoosePlacement("FGD-BF-S", cluster, share);
  EXPECT_EQ(light.node, 1);
  EXPECT_EQ(light.gpus, GpuMask{1});
  // A whole GPU is weighed as in FGD-BF: both choose alike.
  const Pod whole = MakePod(1000, 1, 1000);
  EXPECT_EQ(ChoosePlacement("FGD-BF-S", cluster, whole).node, ChoosePlacement("FGD-BF", cluster, whole).node);
}

TEST(PlacePolicy, OursWithCpuTermKeepsCpuForTheNodesFreeGpus) {
  // The target's GPU classes ask 1 core per 500 and per 1000 milli-GPU alike: 1000 milli-CPU per
  // 750 milli-GPU. A node's free GPU beyond its free CPU / (4/3) is starved.
  EXPECT_DOUBLE_EQ(CpuPerGpu(HalfShareHalfWhole()), 1000.0 / 750.0);
  EXPECT_DOUBLE_EQ(CpuStarvedGpu(2000, 2000, 4.0 / 3.0), 500);
  EXPECT_DOUBLE_EQ(CpuStarvedGpu(4000, 2000, 4.0 / 3.0), 0);
  Cluster cluster;
  // A CPU-only pod of 2 cores. Node 0 (4 cores, 2 free GPUs) keeps a core for each class, so
  // fragmentation does not change, and it is the tighter fit: FGD-BF-S (the control) takes it,
  // key 0 + 100 * (2000/128000 + 2000/8000)/2 = 13.3 against node 1's 74.2. But its 2 cores left
  // feed 1500 of its 2000 milli-GPU: FGD-BF-C adds 500 there and takes node 1.
  cluster.nodes = {MakeNode(4000, 65536, 0, {1000, 1000}),
                   MakeNode(64000, 393216, 0, {1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000})};
  const Pod cpu_only = MakePod(2000, 0, 0);
  EXPECT_EQ(ChoosePlacement("FGD-BF-S", cluster, cpu_only).node, 0);
  EXPECT_EQ(ChoosePlacement("FGD-BF-C", cluster, cpu_only).node, 1);
  // FGD-BF-M leaves CPU-only pods out of the term (both nodes are empty: the same cost to open).
  EXPECT_EQ(ChoosePlacement("FGD-BF-M", cluster, cpu_only).node, 0);
}

// One-GPU pods of 2 and of 30 cores, equally popular: 16 cores per GPU.
TargetWorkload LightAndHeavyOneGpuPods() {
  TargetWorkload target;
  target.classes = {{2000, 1000, 1, ~uint64_t{0}, 0, 0.5}, {30000, 1000, 1, ~uint64_t{0}, 0, 0.5}};
  return target;
}

TEST(PlacePolicy, GeneralCpuTermCountsStarvedGpuAtTheCoresTheClusterHas) {
  EXPECT_DOUBLE_EQ(CpuPerGpu(LightAndHeavyOneGpuPods()), 16.0);
  Cluster cluster;
  cluster.models = {"A"};
  // Node 0 has 12 cores per GPU, node 1 8; the cluster 10 (a node without GPUs does not count),
  // fewer than the workload's 16.
  cluster.nodes = {MakeNode(24000, 65536, 0, {1000, 1000}), MakeNode(16000, 65536, 0, {1000, 1000}),
                   MakeNode(64000, 65536, -1, {})};
  EXPECT_DOUBLE_EQ(ClusterCpuPerGpu(cluster), 10.0);
  // A one-GPU pod of 12 cores. Fragmentation: on either node the 30-core class loses half a GPU
  // (1000 before, 500 after). At the workload's 16 cores per GPU both nodes are starved before
  // and after (node 0: 500, then 1000 - 12000/16 = 250; node 1: 1000, then 750): -250 on each,
  // and best fit decides. FGD-BF-M (the control) takes node 1, the tighter fit: -750 + 7.8
  // (of 128 cores, 8 GPUs) against node 0's -750 + 10.9. At the cluster's 10 node 0 is not
  // starved before or after (12 cores for 1 GPU), node 1 goes from 400 to 1000 - 4000/10 = 600:
  // FGD-BF-G has -500 + 0 + 34.4 on node 0 (best fit of the cluster's most cores, 64, and GPUs,
  // 2) and -500 + 200 + 28.1 on node 1, and takes node 0, which has the cores for the GPU it leaves.
  const Pod pod = MakePod(12000, 1, 1000);
  EXPECT_EQ(ChoosePlacement("FGD-BF-M", cluster, pod, 1, LightAndHeavyOneGpuPods()).node, 1);
  EXPECT_EQ(ChoosePlacement("FGD-BF-G", cluster, pod, 1, LightAndHeavyOneGpuPods()).node, 0);
}

// Shares of 320 and 230 milli-GPU and whole GPUs, 1 core each; a rare 110 share (1% of pods).
TargetWorkload SharesWithARareSmallOne() {
  TargetWorkload target;
  target.classes = {{1000, 320, 1, ~uint64_t{0}, 0, 0.44},
                    {1000, 230, 1, ~uint64_t{0}, 0, 0.30},
                    {1000, 1000, 1, ~uint64_t{0}, 0, 0.25},
                    {1000, 110, 1, ~uint64_t{0}, 0, 0.01}};
  return target;
}

TEST(PlacePolicy, DeadHolesAreThoseOnlyRareSharesFill) {
  // Of the shares (weight 0.75), the 110 is 1.3%: below 5% a hole it alone fills is dead; at 230
  // the shares that fit are 41%.
  EXPECT_EQ(DeadHoleThreshold(SharesWithARareSmallOne(), 0.05), 230);
  EXPECT_EQ(DeadHoleThreshold(SharesWithARareSmallOne(), 0.01), 110);
  EXPECT_EQ(DeadHoleThreshold(SharesWithARareSmallOne(), 0.5), 320);
  EXPECT_EQ(DeadHoleThreshold(HalfShareHalfWhole(), 0.05), 500);
  TargetWorkload whole_only;
  whole_only.classes = {{1000, 1000, 1, ~uint64_t{0}, 0, 1.0}};
  EXPECT_EQ(DeadHoleThreshold(whole_only, 0.05), 0);
}

TEST(PlacePolicy, OursWithHoleTermLeavesNoDeadHoleWhereAFreeGpuWillDo) {
  // A 230 share. Node 0's one GPU has 350 left: the share leaves 120, which only the rare 110
  // fills. Fragmentation there goes from 350 * 0.25 (only the whole GPU does not fit) = 87.5 to
  // 120 (nothing but the 110 fits) = 120 - 1.2 = 118.8: +31.3. On node 1 it opens a free GPU:
  // 0 -> 770 * 0.25 = 192.5. Best-fit (0.4 * 100 * residual) adds 5.1 on node 0 and 9.3 on node 1;
  // no CPU is starved. FGD-BF-C (the control) takes node 0 (36.4 < 201.8). FGD-BF-H adds 3 * 120
  // for the dead hole: 396.4 > 201.8, node 1.
  Cluster cluster;
  cluster.nodes = {MakeNode(32000, 65536, 0, {350}), MakeNode(32000, 65536, 0, {1000, 1000})};
  const Pod share = MakePod(1000, 1, 230);
  EXPECT_EQ(ChoosePlacement("FGD-BF-C", cluster, share, 1, SharesWithARareSmallOne()).node, 0);
  const Placement ours = ChoosePlacement("FGD-BF-H", cluster, share, 1, SharesWithARareSmallOne());
  EXPECT_EQ(ours.node, 1);
  EXPECT_EQ(ours.gpus, GpuMask{1});
}

// One GPU and 8 cores a pod: 5% of pods pinned to model 0 (A), the rest on any model.
TargetWorkload FewPinnedToModelA() {
  TargetWorkload target;
  target.classes = {{8000, 1000, 1, uint64_t{1}, 0, 0.05}, {8000, 1000, 1, ~uint64_t{0}, 0, 0.95}};
  return target;
}

// Node 0: model A, 2 GPUs, 16 cores; node 1: model B, 8 GPUs, 128 cores.
Cluster SmallAAndLargeB() {
  Cluster cluster;
  cluster.models = {"A", "B"};
  cluster.nodes = {MakeNode(16000, 65536, 0, {1000, 1000}),
                   MakeNode(128000, 393216, 1, {1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000})};
  return cluster;
}

TEST(PlacePolicy, PinnedShareIsThePinnedDemandOverTheModelsGpus) {
  // A pod asks 1000 milli-GPU on average, 50 of it pinned to A. At 10 GPUs of demand (the
  // cluster's), A's 2 GPUs owe 0.5 GPU to pinned pods: 25%. Nothing is pinned to B.
  EXPECT_EQ(PinnedShare(FewPinnedToModelA(), SmallAAndLargeB()), (std::vector<double>{0.25, 0.0}));
  // A class pinned to both models is not pinned; nor is one without gpu_spec.
  TargetWorkload any = FewPinnedToModelA();
  any.classes[0].model_mask = 0b11;
  EXPECT_EQ(PinnedShare(any, SmallAAndLargeB()), (std::vector<double>{0.0, 0.0}));
  EXPECT_EQ(PinnedShare(HalfShareHalfWhole(), SmallAAndLargeB()), (std::vector<double>{0.0, 0.0}));
  // Size pins too: a class of 64 cores fits only B's nodes (A's have 16).
  TargetWorkload big = HalfShareHalfWhole();
  big.classes[1].cpu_milli = 64000;
  EXPECT_EQ(PinnedShare(big, SmallAAndLargeB())[0], 0.0);
  EXPECT_GT(PinnedShare(big, SmallAAndLargeB())[1], 0.0);
}

TEST(PlacePolicy, ScarcityRisesAsThePinnedModelFills) {
  Cluster cluster = SmallAAndLargeB();
  const std::vector<double> pinned{0.25, 0.0};
  EXPECT_EQ(ScarcityNow(pinned, cluster, 4.0), (std::vector<double>{0.25, 0.0}));
  cluster.nodes[0].gpu_left[0] = 0;  // 1 of A's 2 GPUs left: 0.5 GPU needed of 1 free
  EXPECT_EQ(ScarcityNow(pinned, cluster, 4.0), (std::vector<double>{0.5, 0.0}));
  cluster.nodes[0].gpu_left[1] = 100;  // under a GPU free counts as one
  EXPECT_EQ(ScarcityNow(pinned, cluster, 4.0), (std::vector<double>{0.5, 0.0}));
  EXPECT_EQ(ScarcityNow({8.0, 0.0}, cluster, 4.0), (std::vector<double>{4.0, 0.0}));  // capped
}

TEST(PlacePolicy, OursWithModelTermKeepsUnpinnedPodsOffThePinnedPodsModel) {
  // An unpinned pod of 1 GPU, 8 cores. On node 0 (A) fragmentation stays 0 (both classes fit
  // its last GPU and 8 cores); on node 1 (B) it falls by 0.05 * 1000 (the pinned class cannot use
  // B's idle GPUs). Best fit: 100 * (8000/128000 + 1000/8000)/2 = 9.4 on node 0, 90.6 on node 1.
  // FGD-BF-H (the control): 9.4 < -50 + 90.6, node 0, the model pinned pods need. FGD-BF-M adds
  // 1000 milli-GPU * 25% (A's scarcity: all its GPUs free) = 250 on A, and the same cost to open
  // either node: node 1.
  Cluster cluster = SmallAAndLargeB();
  const Pod unpinned = MakePod(8000, 1, 1000);
  EXPECT_EQ(ChoosePlacement("FGD-BF-H", cluster, unpinned, 1, FewPinnedToModelA()).node, 0);
  EXPECT_EQ(ChoosePlacement("FGD-BF-M", cluster, unpinned, 1, FewPinnedToModelA()).node, 1);
  // A pinned pod goes to A all the same.
  Pod pinned = unpinned;
  pinned.model_mask = 1;
  EXPECT_EQ(ChoosePlacement("FGD-BF-M", cluster, pinned, 1, FewPinnedToModelA()).node, 0);
}

TEST(PlacePolicy, OursWithOpenTermKeepsAnEmptyNodeWhole) {
  // A whole-GPU pod with 3 cores. Node 0 is in use (4 of its 8 cores left, 2 free GPUs); after
  // the pod its last core feeds 750 of its last GPU's 1000 milli (4/3 milli-CPU per milli-GPU):
  // FGD-BF-C's term adds 250, and with best fit 6.6 it is 256.6 against node 1's 67.6, so
  // FGD-BF-H (the control) opens empty node 1. FGD-BF-M charges 300 for opening a node (a whole
  // node is what a big pod that arrives later needs) and takes node 0.
  Cluster cluster;
  cluster.nodes = {MakeNode(4000, 65536, 0, {1000, 1000}),
                   MakeNode(64000, 393216, 0, {1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000})};
  cluster.nodes[0].cpu_capacity = 8000;
  const Pod pod = MakePod(3000, 1, 1000);
  EXPECT_EQ(ChoosePlacement("FGD-BF-H", cluster, pod).node, 1);
  EXPECT_EQ(ChoosePlacement("FGD-BF-M", cluster, pod).node, 0);
}

TEST(PlacePolicy, FirstFitTakesTheFirstNodeThatFitsAndItsFirstGpuWithRoom) {
  Cluster cluster;
  cluster.nodes = {MakeNode(4000, 65536, 0, {1000}), MakeNode(32000, 65536, 0, {200, 600, 1000}),
                   MakeNode(32000, 65536, 0, {500, 1000})};
  const Pod share = MakePod(8000, 1, 500);  // node 0 lacks CPU
  const Placement placement = ChoosePlacement("FirstFit", cluster, share);
  EXPECT_EQ(placement.node, 1);
  EXPECT_EQ(placement.gpus, GpuMask{0b010});  // 600, the first with room; best fit would agree here
  EXPECT_EQ(FirstGpusWithRoom(MakeNode(32000, 65536, 0, {1000, 600}), share), GpuMask{0b01});  // not the tighter 600
  EXPECT_EQ(ChoosePlacement("FirstFit", cluster, MakePod(1000, 1, 1000)).node, 0);             // 1 core: node 0 fits
}

TEST(PlacePolicy, SpreadTakesTheLeastLoadedNodeAndTheRoomiestGpu) {
  Cluster cluster;
  // Free share after a 1-core, 500-milli pod: node 0 (8/16 cores, GPUs 400+1000 of 2000) ->
  // (7/16 + 900/2000)/2 = 0.44 -> 44; node 1 (30/32 cores, 1000+700 of 2000) -> (29/32 + 1200/2000)/2 = 75.
  cluster.nodes = {MakeNode(16000, 65536, 0, {400, 1000}), MakeNode(32000, 65536, 0, {1000, 700})};
  cluster.nodes[0].cpu_left = 8000;
  cluster.nodes[1].cpu_left = 30000;
  const Pod share = MakePod(1000, 1, 500);
  EXPECT_EQ(SpreadScore(cluster.nodes[0], share), 44);
  EXPECT_EQ(SpreadScore(cluster.nodes[1], share), 75);
  const Placement placement = ChoosePlacement("Spread", cluster, share);
  EXPECT_EQ(placement.node, 1);
  EXPECT_EQ(placement.gpus, GpuMask{0b01});  // the free GPU, not the tighter 700 best fit takes
  EXPECT_EQ(BestFitGpus(cluster.nodes[1], share), GpuMask{0b10});
}

TEST(PlacePolicy, EveryListedPolicyExists) {
  Cluster cluster;
  cluster.nodes = {MakeNode(32000, 65536, 0, {1000, 1000})};
  for (const std::string& name : PolicyNames()) EXPECT_NE(MakePolicy(name, HalfShareHalfWhole(), cluster, 1), nullptr);
  EXPECT_EQ(MakePolicy("NoSuchPolicy", HalfShareHalfWhole(), cluster, 1), nullptr);
}

}  // namespace
}  // namespace gpuslice::place
