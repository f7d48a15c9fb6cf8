// Stranded GPUs: idle GPU share that no pending pod can use, per node and across a cluster as
// pending pods come and go; in FGD's experiment and in the replay.
#include <gtest/gtest.h>

#include <cmath>

#include "place/experiment.h"
#include "place/replay.h"
#include "place/stranded.h"

namespace gpuslice::place {
namespace {

NodeState MakeNode(int64_t cpu, std::vector<int> gpu_left) {
  NodeState node;
  node.cpu_left = node.cpu_capacity = cpu;
  node.memory_left = 65536;
  node.model = 0;
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

TEST(PlaceStranded, AGpuIsStrandedWhenNoPendingPodCanUseIt) {
  const NodeState node = MakeNode(8000, {300, 700, 1000});  // 2000 idle
  EXPECT_EQ(NodeStrandedMilli(node, {}), 2000);
  EXPECT_EQ(NodeStrandedMilli(node, {MakePod(1000, 1, 500)}), 300);  // 700 and 1000 have room
  EXPECT_EQ(NodeStrandedMilli(node, {MakePod(1000, 1, 200)}), 0);
  EXPECT_EQ(NodeStrandedMilli(node, {MakePod(9000, 1, 200)}), 2000);   // lacks CPU: nothing usable
  EXPECT_EQ(NodeStrandedMilli(node, {MakePod(1000, 2, 1000)}), 2000);  // one free GPU, two asked
  EXPECT_EQ(NodeStrandedMilli(node, {MakePod(1000, 2, 1000), MakePod(1000, 1, 700)}), 300);
  Pod other_model = MakePod(1000, 1, 100);
  other_model.model_mask = uint64_t{1} << 1;
  EXPECT_EQ(NodeStrandedMilli(node, {other_model}), 2000);
}

TEST(PlaceStranded, MeterFollowsThePendingPodsAndTheNodes) {
  Cluster cluster;
  cluster.nodes = {MakeNode(8000, {300, 1000}), MakeNode(8000, {1000, 1000})};
  StrandedMeter meter(cluster.nodes.size());
  EXPECT_EQ(meter.StrandedMilli(cluster), 0);  // nothing pending: nothing stranded
  const Pod two = MakePod(1000, 2, 1000), share = MakePod(1000, 1, 250);
  meter.AddPending(two);
  EXPECT_EQ(meter.StrandedMilli(cluster), 1300);  // node 0's 300 and free GPU: two GPUs do not fit
  meter.AddPending(share);
  meter.AddPending(share);
  EXPECT_EQ(meter.StrandedMilli(cluster), 0);  // a 250 share uses any of them
  meter.RemovePending(share);
  EXPECT_EQ(meter.StrandedMilli(cluster), 0);                  // one share still pending
  Place(cluster.nodes[0], MakePod(1000, 1, 100), GpuMask{1});  // node 0's GPU 0 down to 200
  EXPECT_EQ(meter.StrandedMilli(cluster), 200);
  meter.RemovePending(share);
  EXPECT_EQ(meter.StrandedMilli(cluster), 1200);  // only the two-GPU pod is left
  meter.RemovePending(two);
  EXPECT_EQ(meter.StrandedMilli(cluster), 0);
}

PodSpec Spec(const std::string& name, int num_gpu, int gpu_milli, int64_t created = -1, int64_t deleted = -1) {
  PodSpec pod;
  pod.name = name;
  pod.cpu_milli = 1000;
  pod.memory_mib = 1024;
  pod.num_gpu = num_gpu;
  pod.gpu_milli = gpu_milli;
  pod.creation_time = created;
  pod.deletion_time = deleted;
  return pod;
}

double LastValue(const std::vector<double>& series) {
  for (auto it = series.rbegin(); it != series.rend(); ++it) {
    if (!std::isnan(*it)) return *it;
  }
  return std::nan("");
}

// Two 2-GPU nodes; 600-milli shares and 2-GPU pods. Spread puts the shares on both nodes when it
// can, and then no 2-GPU pod fits beside 2.8 idle GPUs; first-fit keeps a node whole. Once every
// pod has arrived, only failed pods are pending, and they fit nowhere: stranded = unallocated.
TEST(PlaceStranded, SpreadStrandsGpusThatFirstFitKeepsWhole) {
  const Experiment experiment =
      PrepareExperiment({{"n0", 32000, 65536, 2, "T4"}, {"n1", 32000, 65536, 2, "T4"}},
                        {Spec("a", 1, 600), Spec("b", 1, 600), Spec("c", 2, 1000), Spec("d", 2, 1000)});
  RunOptions options;
  options.inflation = 1.0;
  double spread = 0, first_fit = 0;
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    for (const char* policy : {"Spread", "FirstFit"}) {
      const RunSeries run = RunOne(experiment, policy, seed, options);
      for (size_t p = 0; p < run.stranded_gpu_pct.size(); ++p) {
        if (!std::isnan(run.stranded_gpu_pct[p])) {
          EXPECT_LE(run.stranded_gpu_pct[p], 100.0 - run.allocated_gpu_pct[p] + 1e-9);
        }
      }
      EXPECT_NEAR(LastValue(run.stranded_gpu_pct), 100.0 - LastValue(run.allocated_gpu_pct), 1e-9) << policy << seed;
      (std::string(policy) == "Spread" ? spread : first_fit) += LastValue(run.stranded_gpu_pct);
    }
  }
  EXPECT_GT(spread, first_fit);
}

// One node, two GPUs. a and b (600 each) run from 0 to 10, one per GPU; c asks for both GPUs at
// 1 and waits, FIFO, until 10 while 800 milli sit idle; d (a share) arrives last, at 10.
std::vector<PodSpec> HeadWaitsForTwoGpus() {
  return {Spec("a", 1, 600, 0, 10), Spec("b", 1, 600, 0, 10), Spec("c", 2, 1000, 1, 2), Spec("d", 1, 100, 10, 11)};
}

TEST(PlaceStranded, ReplayCountsIdleGpusNoQueuedPodCanUse) {
  const Experiment experiment = PrepareExperiment({{"n0", 32000, 65536, 2, "T4"}}, HeadWaitsForTwoGpus());
  const ReplayResult r = Replay(experiment, "Spread", 1, ReplayOptions{});
  EXPECT_NEAR(r.stranded_gpu_pct, 100.0 * 800 * 9 / 10 / 2000, 1e-9);  // 0.8 of 2 GPUs, 9 s of 10
  EXPECT_NEAR(r.idle_while_waiting_gpu_pct, r.stranded_gpu_pct, 1e-9);
  // The control: e (a 300 share) queues behind c at 2 and could use either idle 400: from then on
  // nothing is stranded, though GPUs still sit idle while pods wait.
  std::vector<PodSpec> pods = HeadWaitsForTwoGpus();
  pods.push_back(Spec("e", 1, 300, 2, 3));
  const ReplayResult control =
      Replay(PrepareExperiment({{"n0", 32000, 65536, 2, "T4"}}, pods), "Spread", 1, ReplayOptions{});
  EXPECT_NEAR(control.stranded_gpu_pct, 100.0 * 800 * 1 / 10 / 2000, 1e-9);
  EXPECT_NEAR(control.idle_while_waiting_gpu_pct, 100.0 * 800 * 9 / 10 / 2000, 1e-9);
  ASSERT_FALSE(control.hourly_stranded_pct.empty());
  EXPECT_NEAR(control.hourly_stranded_pct[0], 100.0 * 800 / 3600 / 2000, 1e-9);  // the hour's mean
}

}  // namespace
}  // namespace gpuslice::place
