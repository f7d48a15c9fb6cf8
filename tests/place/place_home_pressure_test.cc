// FGD-BF-G's homes (place/home_pressure.h): a class's homes on a node, the chance its last home
// is wanted, and the policy keeping a big pod's home or taking an empty node without GPUs where
// the controls (FGD-BF-H, FGD-BF-M) do not; hand-made clusters, answers worked out by hand.
#include <gtest/gtest.h>

#include <cmath>

#include "place/home_pressure.h"
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

Pod MakePod(int64_t cpu, int num_gpu, int gpu_milli) {
  Pod pod;
  pod.cpu_milli = cpu;
  pod.memory_mib = 1024;
  pod.num_gpu = num_gpu;
  pod.gpu_milli = gpu_milli;
  return pod;
}

TargetClass Class(int64_t cpu, int num_gpu, int gpu_milli, double weight, uint64_t models = ~uint64_t{0}) {
  return TargetClass{cpu, gpu_milli, num_gpu, models, 1024, weight};
}

TEST(PlaceHomes, CountsTheRoomForOneMorePodOfAClass) {
  const NodeState node = MakeNode(16000, 8192, 0, {1000, 1000, 1000, 600, 300});
  EXPECT_EQ(Homes(node, Class(1000, 1, 250, 1)), 8);   // 4 + 4 + 4 + 2 + 1 by GPU, 16 by CPU, 8 by memory
  EXPECT_EQ(Homes(node, Class(1000, 1, 1000, 1)), 3);  // whole free GPUs only
  EXPECT_EQ(Homes(node, Class(1000, 2, 1000, 1)), 1);
  EXPECT_EQ(Homes(node, Class(1000, 4, 1000, 1)), 0);
  EXPECT_EQ(Homes(node, Class(8000, 1, 300, 1)), 2);                           // 16 cores: two of 8
  EXPECT_EQ(Homes(node, Class(1000, 1, 300, 1, uint64_t{1} << 1)), 0);         // another model
  EXPECT_EQ(Homes(MakeNode(16000, 8192, -1, {}), Class(1000, 1, 300, 1)), 0);  // a node without GPUs
}

TEST(PlaceHomes, TheLastHomeIsWantedWithPoissonOdds) {
  EXPECT_DOUBLE_EQ(PoissonTail(2.0, 0), 1.0);
  EXPECT_NEAR(PoissonTail(2.0, 1), 1 - std::exp(-2.0), 1e-12);
  EXPECT_NEAR(PoissonTail(2.0, 3), 1 - std::exp(-2.0) * (1 + 2 + 2), 1e-12);  // 0.3233
  EXPECT_NEAR(PoissonTail(100.0, 100), 0.5, 0.03);                            // the normal approximation near the mean
  EXPECT_LT(PoissonTail(100.0, 200), 1e-9);
  EXPECT_DOUBLE_EQ(PoissonTail(0.0, 1), 0.0);
}

// 96% one-GPU pods and 4% four-GPU pods of 1 core (1,120 milli-GPU a pod); the four-GPU class is
// too rare to be in the target's 95% of pods, so FGD's measure does not see it.
TargetWorkload RareFourGpuPods() {
  TargetWorkload target;
  target.classes = {Class(1000, 1, 1000, 1.0)};
  target.all_classes = {Class(1000, 1, 1000, 0.96), Class(1000, 4, 1000, 0.04)};
  return target;
}

// Node 0: four free GPUs; node 1: seven of eight free. Each holds one four-GPU pod.
Cluster TwoFourGpuHomes() {
  Cluster cluster;
  cluster.models = {"A"};
  cluster.nodes = {MakeNode(64000, 262144, 0, {1000, 1000, 1000, 1000}),
                   MakeNode(128000, 524288, 0, {0, 1000, 1000, 1000, 1000, 1000, 1000, 1000})};
  cluster.nodes[1].cpu_left = 120000;
  return cluster;
}

TEST(PlaceHomes, AClassWithFewHomesForThePodsToComeIsValued) {
  Cluster cluster = TwoFourGpuHomes();
  HomePressure homes(RareFourGpuPods(), cluster, 2);
  homes.Update(cluster);
  // 11 free GPUs / 1,120 milli a pod = 9.8 pods to come, 0.39 of them four-GPU pods, for 2 homes:
  // P(N >= 2) = 1 - e^-0.39 (1 + 0.39) = 0.059, x 4,000 milli-GPU = 235 for the home node 0 loses.
  ASSERT_TRUE(homes.AnyValued());
  NodeState after = cluster.nodes[0];
  Place(after, MakePod(1000, 1, 1000), FirstFreeGpus(after, 1));
  const double mean = 11000.0 / 1120.0 * 0.04;
  EXPECT_NEAR(homes.Cost(cluster.nodes[0], after), 4000 * (1 - std::exp(-mean) * (1 + mean)), 1e-6);
  NodeState after1 = cluster.nodes[1];
  Place(after1, MakePod(1000, 1, 1000), FirstFreeGpus(after1, 1));
  EXPECT_DOUBLE_EQ(homes.Cost(cluster.nodes[1], after1), 0.0);  // 6 free GPUs: still one home
  // Ten more such nodes: 20 homes for 4 pods to come, worth nothing.
  for (int i = 0; i < 10; ++i) cluster.nodes.push_back(MakeNode(64000, 262144, 0, {1000, 1000, 1000, 1000}));
  HomePressure many(RareFourGpuPods(), cluster, 2);
  many.Update(cluster);
  EXPECT_FALSE(many.AnyValued());
}

Placement Choose(const std::string& name, Cluster& cluster, const Pod& pod, const TargetWorkload& target) {
  auto policy = MakePolicy(name, target, cluster, 4);
  std::vector<int> feasible;
  for (size_t n = 0; n < cluster.nodes.size(); ++n) {
    if (Fits(cluster.nodes[n], pod)) feasible.push_back(static_cast<int>(n));
  }
  Rng rng(1);
  return policy->Choose(cluster, pod, feasible, rng);
}

TEST(PlaceHomes, OursKeepsTheHomeABigPodToComeNeeds) {
  // A one-GPU pod of 1 core. Fragmentation does not change on either node (the one-GPU class
  // fits both after). Best fit: node 0 (63/128 + 3/8)/2 x 100 = 43.4, node 1 (119/128 + 6/8)/2 x
  // 100 = 84.0: FGD-BF-H (the control) takes node 0, the home of a four-GPU pod. FGD-BF-G adds
  // 235 there (above) and takes node 1, whose seven free GPUs keep a home; its residual is a share
  // of the largest node (128 cores, 8 GPUs), as the control's.
  Cluster cluster = TwoFourGpuHomes();
  const Pod pod = MakePod(1000, 1, 1000);
  EXPECT_EQ(Choose("FGD-BF-H", cluster, pod, RareFourGpuPods()).node, 0);
  EXPECT_EQ(Choose("FGD-BF-G", cluster, pod, RareFourGpuPods()).node, 1);
}

TEST(PlaceHomes, OursPutsAPodWithoutGpusOnANodeWithoutGpus) {
  // A pod of 8 cores and no GPU. Node 0: 4 of 8 GPUs and 32 of 64 cores free; node 1: 32 cores,
  // no GPUs, empty. Fragmentation does not change (the one-GPU class of 1 core fits node 0
  // after). Best fit, of the largest node (64 cores, 8 GPUs): node 0 (24/64 + 4/8)/2 x 100 = 43.8,
  // node 1 (24/64)/2 x 100 = 18.8. FGD-BF-M (the control) adds 300 for starting node 1, and puts
  // the pod on the GPU node's cores; FGD-BF-G has no such cost.
  Cluster cluster;
  cluster.models = {"A"};
  cluster.nodes = {MakeNode(64000, 262144, 0, {0, 0, 0, 0, 1000, 1000, 1000, 1000}), MakeNode(32000, 131072, -1, {})};
  cluster.nodes[0].cpu_left = 32000;
  const Pod pod = MakePod(8000, 0, 0);
  EXPECT_EQ(Choose("FGD-BF-M", cluster, pod, RareFourGpuPods()).node, 0);
  EXPECT_EQ(Choose("FGD-BF-G", cluster, pod, RareFourGpuPods()).node, 1);
}

}  // namespace
}  // namespace gpuslice::place
