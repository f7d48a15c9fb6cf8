// MIG-partitioned nodes: layouts read with NVIDIA's profiles, instances taken and given back, an
// isolated share placed only on an instance by every policy where without MIG (the control) it
// shares a GPU, and a share no instance covers failing only when isolated.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <bit>

#include "place/experiment.h"
#include "place/mig.h"
#include "place/policy.h"

namespace gpuslice::place {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(PlaceMig, LayoutSizesAreTheSmallerOfComputeAndMemoryShares) {
  MigOptions options;
  MigLayout layout;
  ASSERT_EQ(ParseMigLayout(options, &layout), "");                // 3g.40gb,2g.20gb,1g.10gb,1g.10gb on an A100-80GB
  EXPECT_THAT(layout.capacity, ElementsAre(125, 125, 250, 428));  // 1g: 1/8 memory; 2g: 2/8; 3g: 3/7 compute
  options.layout = "7g.80gb";
  ASSERT_EQ(ParseMigLayout(options, &layout), "");
  EXPECT_THAT(layout.capacity, ElementsAre(1000));
  options.layout = "4g.40gb,4g.40gb";
  EXPECT_THAT(ParseMigLayout(options, &layout), HasSubstr("--mig-layout: "));
  options.layout = "1g.10gb";
  options.model = "T4";
  EXPECT_THAT(ParseMigLayout(options, &layout), HasSubstr("--mig-model: 'T4' is not a MIG model; valid: A100-40GB"));
}

Pod Share(int milli, bool isolated) {
  Pod pod;
  pod.cpu_milli = 1000;
  pod.memory_mib = 1024;
  pod.num_gpu = 1;
  pod.gpu_milli = milli;
  pod.kind = PodKind::kShareGpu;
  pod.tier = isolated ? 1 : 0;
  pod.isolated = isolated;
  return pod;
}

TEST(PlaceMig, AnIsolatedShareTakesTheSmallestInstanceThatCoversIt) {
  Cluster cluster = BuildCluster({{"m", 32000, 65536, 2, "T4"}, {"s", 32000, 65536, 1, "T4"}});
  MigOptions options;
  options.nodes = {"m"};
  MigLayout layout;
  ASSERT_EQ(ParseMigLayout(options, &layout), "");
  ASSERT_EQ(MarkMigNodes(cluster, {"m", "s"}, options, layout), "");
  NodeState& node = cluster.nodes[0];
  ASSERT_TRUE(node.mig);
  EXPECT_FALSE(cluster.nodes[1].mig);
  EXPECT_EQ(node.gpu_left[0], 928);  // 1000 - the memory slice a 3g+2g+1g+1g layout leaves unused
  EXPECT_EQ(GpusWithRoom(node, Share(200, false)), GpuMask{0});  // shares of the other kind: not here
  Pod open_share = Share(200, false);
  open_share.may_use_mig = true;  // --mig-open
  EXPECT_EQ(GpusWithRoom(node, open_share), GpuMask{0b11});
  EXPECT_EQ(GpusWithRoom(cluster.nodes[1], open_share), GpuMask{0b1});      // and shared GPUs as before
  EXPECT_EQ(GpusWithRoom(cluster.nodes[1], Share(200, true)), GpuMask{0});  // isolated: only here
  EXPECT_FALSE(Fits(node, Share(500, true)));                               // no instance covers 500
  EXPECT_EQ(GpusWithRoom(node, Share(200, true)), GpuMask{0b11});
  Place(node, Share(200, true), GpuMask{0b01});  // the 2g (250)
  Place(node, Share(120, true), GpuMask{0b01});  // a 1g (125)
  Place(node, Share(300, true), GpuMask{0b01});  // the 3g (428)
  EXPECT_EQ(node.gpu_left[0], 125);
  EXPECT_EQ(GpusWithRoom(node, Share(200, true)), GpuMask{0b10});  // GPU 0 has only a 1g left
  EXPECT_EQ(CountMig(node).used, 3);
  EXPECT_EQ(CountMig(node).instances, 8);
  EXPECT_EQ(CountMig(node).used_capacity_milli, 250 + 125 + 428);
  Unplace(node, Share(200, true), GpuMask{0b01});
  EXPECT_EQ(node.gpu_left[0], 375);
  EXPECT_EQ(GpusWithRoom(node, Share(240, true)), GpuMask{0b11});  // the 2g is free again
}

// Node "s" has one GPU holding a 500 share of the free tier; node "m" one empty GPU. A 300 share
// of the paid tier: with "m" partitioned and isolation on, every policy puts it on an instance of
// "m"; without MIG (the control), the packing policies put it beside the 500.
TEST(PlaceMig, EveryPolicyPutsAnIsolatedShareOnAnInstanceWhereWithoutMigItSharesAGpu) {
  PodSpec free_share{"a-free", 1000, 1024, 1, 500, {}, 0, 0, -1, -1, "BE", 7};
  PodSpec paid_share{"b-paid", 1000, 1024, 1, 300, {}, 0, 0, -1, -1, "LS", 7};
  const Experiment experiment =
      PrepareExperiment({{"s", 32000, 65536, 1, "T4"}, {"m", 32000, 65536, 1, "T4"}}, {free_share, paid_share});
  for (bool mig : {true, false}) {
    MigOptions options;
    options.nodes = {"m"};
    MigLayout layout;
    ASSERT_EQ(ParseMigLayout(options, &layout), "");
    const RunPods pods = PodsForRun(experiment, false, -1, 7, /*isolate_paid=*/mig);
    for (const std::string& name : PolicyNames()) {
      Cluster cluster = experiment.cluster;
      if (mig) {
        ASSERT_EQ(MarkMigNodes(cluster, experiment.node_names, options, layout), "");
      }
      Place(cluster.nodes[0], pods.pods[0], GpuMask{1});
      const Pod& paid = pods.pods[1];
      EXPECT_EQ(paid.isolated, mig);
      std::vector<int> feasible;
      for (int n = 0; n < 2; ++n) {
        if (Fits(cluster.nodes[static_cast<size_t>(n)], paid)) feasible.push_back(n);
      }
      std::unique_ptr<Policy> policy = MakePolicy(name, experiment.target, cluster, pods.score_classes);
      Rng rng(1);
      const Placement placement = policy->Choose(cluster, paid, feasible, rng);
      if (mig) {
        EXPECT_EQ(feasible, std::vector<int>{1}) << name;
        EXPECT_EQ(placement.node, 1) << name;
        Place(cluster.nodes[1], paid, placement.gpus);
        EXPECT_EQ(CountMig(cluster.nodes[1]).used, 1) << name;
        EXPECT_EQ(cluster.nodes[1].gpu_left[0], 928 - 428) << name;  // the 3g, whole
      } else if (name == "BestFit" || name == "FirstFit" || name == "GpuPacking") {
        EXPECT_EQ(placement.node, 0) << name;  // beside the free share: what isolation forbids
      }
    }
  }
}

// Only paid shares of 600: no instance of 3g+2g+1g+1g covers one, so with isolation every one
// fails; without MIG (the control) none does. Free shares of 100 never use the MIG node's GPUs.
TEST(PlaceMig, IsolatedSharesNoInstanceCoversFailAndTheInstancesStayFree) {
  std::vector<PodSpec> specs;
  for (int p = 0; p < 6; ++p) {
    const bool paid = p % 2 == 0;
    specs.push_back(
        {"p" + std::to_string(p), 1000, 1024, 1, paid ? 600 : 100, {}, 0, 0, -1, -1, paid ? "LS" : "BE", 7});
  }
  const Experiment experiment =
      PrepareExperiment({{"m", 64000, 262144, 4, "T4"}, {"s", 64000, 262144, 4, "T4"}}, specs);
  for (const char* policy : {"FirstFit", "BestFit", "FGD", "FGD-BF"}) {
    RunOptions options;
    options.inflation = 0.5;  // room for every pod without MIG
    options.tiers = true;
    options.mig.nodes = {"m"};
    options.mig.isolate_paid = true;
    ASSERT_EQ(ParseMigLayout(options.mig, &options.mig_layout), "");
    const RunSeries isolated = RunOne(experiment, policy, 3, options);
    EXPECT_TRUE(isolated.mig_measured);
    EXPECT_GT(isolated.isolated_pods, 0) << policy;
    EXPECT_EQ(isolated.isolated_failed, isolated.isolated_pods) << policy;
    EXPECT_EQ(isolated.mig_instances, 16);
    EXPECT_EQ(isolated.mig_used_at_100, 0) << policy;  // at the run's end: the free shares stayed off
    options.mig = MigOptions{};                        // the control
    const RunSeries control = RunOne(experiment, policy, 3, options);
    EXPECT_EQ(control.isolated_pods, 0);
    EXPECT_EQ(control.failed_total, 0) << policy;
  }
}

}  // namespace
}  // namespace gpuslice::place
