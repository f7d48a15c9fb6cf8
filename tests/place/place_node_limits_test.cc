// Clusters unlike the trace's: nodes of up to 16 GPUs (and NVLink islands of their size), and pod
// lists pinned to GPU models the cluster lacks, which run with those pods counted as impossible.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <bit>
#include <string>

#include "place/experiment.h"
#include "place_test_files.h"

namespace gpuslice::place {
namespace {

using ::testing::HasSubstr;
using testing_files::RunCli;

PodSpec Spec(const std::string& name, int64_t cpu, int num_gpu, int gpu_milli, std::vector<std::string> models = {}) {
  PodSpec pod;
  pod.name = name;
  pod.cpu_milli = cpu;
  pod.memory_mib = 1024;
  pod.num_gpu = num_gpu;
  pod.gpu_milli = gpu_milli;
  pod.gpu_models = std::move(models);
  return pod;
}

TEST(PlaceSixteenGpuNodes, HoldSixteenGpuPodsAndSixteenShares) {
  const Experiment experiment = PrepareExperiment({{"n0", 256000, 2097152, 16, "H100"}},
                                                  {Spec("whole", 64000, 16, 1000), Spec("share", 1000, 1, 500)});
  EXPECT_TRUE(experiment.impossible.empty());
  NodeState node = experiment.cluster.nodes[0];
  const Pod& whole = experiment.pods[1];  // sorted by name: "share", "whole"
  ASSERT_EQ(whole.num_gpu, 16);
  ASSERT_TRUE(Fits(node, whole));
  EXPECT_EQ(FirstFreeGpus(node, 16), GpuMask{0xffff});
  const Pod& share = experiment.pods[0];
  for (int i = 0; i < 32; ++i) {
    ASSERT_TRUE(Fits(node, share)) << i;
    Place(node, share, BestFitGpus(node, share));
  }
  EXPECT_EQ(node.GpuLeftTotal(), 0);
  EXPECT_FALSE(Fits(node, share));
}

TEST(PlaceSixteenGpuNodes, ANodeListOfSixteenGpuNodesRunsWithIslandsOfTheirSize) {
  // Two 16-GPU nodes and one of 10; pods of 16, 10 and 2 GPUs and shares. Every policy runs,
  // nothing is impossible; with islands of 16 a 16-GPU pod's pairs are all on NVLink, with islands
  // of 8 (the control) 56 of its 120 pairs are.
  std::string nodes = testing_files::kNodeHeader, pods = testing_files::kPodHeader5;
  nodes += "a,256000,2097152,16,H100\nb,256000,2097152,16,H100\nc,160000,1310720,10,H100\n";
  pods += "big,64000,65536,16,1000\nten,40000,65536,10,1000\n";
  for (int i = 0; i < 12; ++i) pods += "s" + std::to_string(i) + ",4000,8192," + (i % 3 ? "1,500" : "2,1000") + "\n";
  const std::string args = "--nodes " + testing_files::WriteFixture("nodes.csv", nodes) + " --pods " +
                           testing_files::WriteFixture("pods.csv", pods) + " --seeds 2 --jobs 1 --quiet --no-chart";
  int status = -1;
  std::string output = RunCli(args, &status);
  EXPECT_EQ(status, 0) << output;
  EXPECT_EQ(output.find("warning"), std::string::npos) << output;
  EXPECT_THAT(output, HasSubstr("| FGD-BF-M | 2 |"));
  EXPECT_THAT(output, HasSubstr("Cluster: 3 nodes, 42 GPUs"));
  output = RunCli(args + " --policies FirstFit --nvlink-island 16", &status);
  EXPECT_EQ(status, 0) << output;
  // 16-GPU, 10-GPU and 2-GPU pods, all on one island each: 100% of NVLink.
  EXPECT_THAT(output, HasSubstr("| 100.0 | 100.0 |"));
  output = RunCli(args + " --policies FirstFit --nvlink-island 8", &status);
  EXPECT_EQ(status, 0) << output;
  EXPECT_EQ(output.find("| 100.0 | 100.0 |"), std::string::npos) << output;
}

TEST(PlaceAbsentModels, PodsPinnedToModelsTheClusterLacksAreImpossible) {
  const Experiment experiment =
      PrepareExperiment({{"n0", 32000, 131072, 2, "T4"}, {"n1", 32000, 131072, 2, "A10"}},
                        {Spec("a", 2000, 1, 500), Spec("b", 2000, 1, 500, {"V100M16", "V100M32"}),
                         Spec("c", 2000, 1, 500, {"V100M16", "T4"}), Spec("d", 2000, 1, 500, {"P100"})});
  // b and d name no model the cluster has; c names one it has, and runs there only.
  ASSERT_EQ(experiment.impossible.size(), 2u);
  EXPECT_EQ(experiment.impossible[0].first_pod, "b");
  EXPECT_EQ(experiment.impossible[0].shape, "1 GPU x 500 milli-GPU of V100M16|V100M32, 2 cores, 1024 MiB");
  EXPECT_EQ(experiment.impossible[0].why, "no node has a GPU of its models (the cluster has T4, A10)");
  EXPECT_EQ(experiment.impossible[1].first_pod, "d");
  EXPECT_EQ(std::popcount(experiment.pods[2].model_mask), 1);
  for (const TargetClass& c : experiment.target.classes) EXPECT_NE(c.model_mask, 0u);
  const RunSeries run = RunOne(experiment, "FGD-BF-M", 1, RunOptions{});
  EXPECT_GT(run.failed_total, 0);
}

TEST(PlaceAbsentModels, APinnedListOnAClusterWithoutItsModelRunsAndWarns) {
  std::string nodes = testing_files::kNodeHeader, pods = testing_files::kPodHeader11;
  for (int i = 0; i < 4; ++i) nodes += "n" + std::to_string(i) + ",32000,131072,2,T4\n";
  for (int i = 0; i < 12; ++i) pods += "p" + std::to_string(i) + ",2000,4096,1,500,,LS,Running,0,10,0\n";
  for (int i = 0; i < 3; ++i) pods += "q" + std::to_string(i) + ",2000,4096,1,1000,V100M16|V100M32,LS,Running,0,10,0\n";
  int status = -1;
  const std::string output = RunCli("--nodes " + testing_files::WriteFixture("nodes.csv", nodes) + " --pods " +
                                        testing_files::WriteFixture("pods.csv", pods) +
                                        " --seeds 1 --jobs 1 --policies FGD,FGD-BF-M --quiet --no-chart",
                                    &status);
  EXPECT_EQ(status, 0) << output;
  EXPECT_THAT(output, HasSubstr("warning: " + testing_files::WriteFixture("pods.csv", pods) +
                                ":14: 3 pods (the first q0) ask for 1 GPU x 1000 milli-GPU of V100M16|V100M32, 2 "
                                "cores, 4096 MiB, which no node can hold: no node has a GPU of its models (the "
                                "cluster has T4); counted as failed when they arrive"));
  EXPECT_THAT(output, HasSubstr("| FGD-BF-M | 1 |"));
}

}  // namespace
}  // namespace gpuslice::place
