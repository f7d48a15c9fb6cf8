// FGD's measure, its target workload, workload inflation, the metrics per 1% of arrived demand,
// determinism by seed, and the CLI end to end on small fixtures.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <utility>

#include "place/experiment.h"
#include "place/fragmentation.h"
#include "place/inflation.h"
#include "place_test_files.h"

namespace gpuslice::place {
namespace {

using ::testing::HasSubstr;

NodeState MakeNode(int64_t cpu, int model, std::vector<int> gpu_left) {
  NodeState node;
  node.cpu_left = node.cpu_capacity = cpu;
  node.memory_left = 65536;
  node.model = model;
  node.gpus = static_cast<int>(gpu_left.size());
  for (size_t g = 0; g < gpu_left.size(); ++g) node.gpu_left[g] = static_cast<int16_t>(gpu_left[g]);
  return node;
}

PodSpec Spec(const std::string& name, int64_t cpu, int num_gpu, int gpu_milli) {
  PodSpec pod;
  pod.name = name;
  pod.cpu_milli = cpu;
  pod.memory_mib = 1024;
  pod.num_gpu = num_gpu;
  pod.gpu_milli = gpu_milli;
  return pod;
}

TEST(PlaceFragmentation, FollowsFgdsRules) {
  const NodeState node = MakeNode(8000, 0, {300, 700, 1000});  // 2000 idle
  auto frag_of = [&](TargetClass c) {
    c.weight = 1;
    TargetWorkload target;
    target.classes = {c};
    return NodeFragmentation(node, target);
  };
  EXPECT_EQ(frag_of({1000, 0, 0}), 2000);                      // CPU-only: all idle GPU is fragment
  EXPECT_EQ(frag_of({1000, 500, 1, uint64_t{1} << 1}), 2000);  // a model it may not use
  EXPECT_EQ(frag_of({9000, 500, 1}), 2000);                    // lacks CPU
  EXPECT_EQ(frag_of({1000, 500, 1}), 300);                     // fits: the GPU with less than 500
  EXPECT_EQ(frag_of({1000, 800, 1}), 1000);                    // fits on the free GPU: 300 + 700
  EXPECT_EQ(frag_of({1000, 700, 1}), 300);                     // exactly 700 left is room for 700
  EXPECT_EQ(frag_of({1000, 1000, 2}), 2000);                   // two whole GPUs: only one is free
  EXPECT_EQ(frag_of({1000, 200, 1}), 0);
  TargetWorkload mixed;
  mixed.classes = {{1000, 0, 0, ~uint64_t{0}, 0, 0.25}, {1000, 500, 1, ~uint64_t{0}, 0, 0.75}};
  EXPECT_DOUBLE_EQ(NodeFragmentation(node, mixed), 0.25 * 2000 + 0.75 * 300);
  // Memory counts only when the target is memory-aware (ours; FGD ignores it).
  mixed.classes[1].memory_mib = 100000;
  EXPECT_DOUBLE_EQ(NodeFragmentation(node, mixed), 0.25 * 2000 + 0.75 * 300);
  mixed.memory_aware = true;
  EXPECT_DOUBLE_EQ(NodeFragmentation(node, mixed), 2000);
  EXPECT_EQ(NodeFragmentation(MakeNode(8000, 0, {0, 0}), mixed), 0);
}

TEST(PlaceFragmentation, TargetWorkloadTakesClassesByPopularity) {
  std::vector<PodSpec> specs;
  for (int i = 0; i < 5; ++i) specs.push_back(Spec("a" + std::to_string(i), 1000, 1, 500));
  for (int i = 0; i < 3; ++i) specs.push_back(Spec("b" + std::to_string(i), 4000, 1, 1000));
  specs.push_back(Spec("c", 2000, 0, 0));
  specs.push_back(Spec("d", 1000, 0, 0));
  Cluster cluster = BuildCluster({{"n0", 64000, 262144, 2, "T4"}});
  const std::vector<Pod> pods = BuildPods(specs, cluster, nullptr);
  // 80%: a (5) then b (8 of 10) reach it.
  TargetWorkload target = BuildTargetWorkload(specs, pods, 0.8);
  ASSERT_EQ(target.classes.size(), 2u);
  EXPECT_EQ(target.classes[0].gpu_milli, 500);
  EXPECT_DOUBLE_EQ(target.classes[0].weight, 5.0 / 8);
  EXPECT_DOUBLE_EQ(target.classes[1].weight, 3.0 / 8);
  // 95%: c and d tie at one pod each; the larger (c, 2 cores) comes first, and both are needed.
  target = BuildTargetWorkload(specs, pods, 0.95);
  ASSERT_EQ(target.classes.size(), 4u);
  EXPECT_EQ(target.classes[2].cpu_milli, 2000);
  EXPECT_EQ(target.classes[3].cpu_milli, 1000);
  EXPECT_DOUBLE_EQ(target.classes[3].weight, 0.1);
  EXPECT_EQ(target.classes[0].memory_mib, 1024);
}

std::vector<Pod> PodsOf(const std::vector<PodSpec>& specs) {
  return BuildPods(specs, BuildCluster({{"n0", 64000, 262144, 8, "T4"}}), nullptr);
}

TEST(PlaceImpossiblePods, AreKeptOutOfTheTargetWorkloadAndNamedOncePerClass) {
  // Two-GPU nodes of 32 cores. The most popular class asks for 4 GPUs and a CPU-only class for
  // 999,999 cores: no node can hold either, so neither may become a target class.
  std::vector<NodeSpec> nodes;
  for (int i = 0; i < 3; ++i) nodes.push_back(NodeSpec{"n" + std::to_string(i), 32000, 131072, 2, "T4"});
  std::vector<PodSpec> pods;
  for (int i = 0; i < 6; ++i) pods.push_back(Spec("a" + std::to_string(i), 8000, 4, 1000));
  for (int i = 0; i < 3; ++i) pods.push_back(Spec("b" + std::to_string(i), 4000, 1, 1000));
  for (int i = 0; i < 2; ++i) pods.push_back(Spec("c" + std::to_string(i), 999999000, 0, 0));
  const Experiment experiment = PrepareExperiment(nodes, pods);
  for (const TargetClass& c : experiment.target.classes) {
    EXPECT_LE(c.num_gpu, 2);
    EXPECT_LE(c.cpu_milli, 32000);
  }
  ASSERT_EQ(experiment.target.classes.size(), 1u);
  EXPECT_EQ(experiment.target.classes[0].num_gpu, 1);
  EXPECT_DOUBLE_EQ(experiment.target.classes[0].weight, 1.0);
  ASSERT_EQ(experiment.impossible.size(), 2u);
  EXPECT_EQ(experiment.impossible[0].count, 6);
  EXPECT_EQ(experiment.impossible[0].first_pod, "a0");
  EXPECT_THAT(experiment.impossible[0].why, HasSubstr("the most GPUs a node of its models has is 2"));
  EXPECT_EQ(experiment.impossible[1].count, 2);
  EXPECT_THAT(experiment.impossible[1].why, HasSubstr("the most cores a node has is 32"));
  EXPECT_THAT(ImpossibleWarning("pods.csv", experiment.impossible[0]),
              HasSubstr("warning: pods.csv:0: 6 pods (the first a0) ask for 4 GPUs x 1000 milli-GPU, 8 cores"));
  // They still arrive, and fail.
  const RunSeries run = RunOne(experiment, "FGD", 1, RunOptions{});
  EXPECT_GT(run.failed_total, 0);
}

TEST(PlaceInflation, ShufflesThenSamplesUntilTheDemandReachesTheRatio) {
  std::vector<PodSpec> specs;
  for (int i = 0; i < 10; ++i) specs.push_back(Spec("p" + std::to_string(i), 1000, 1 + i % 2, 1000));
  const std::vector<Pod> pods = PodsOf(specs);                              // 15 GPUs asked for
  const std::vector<int> arrivals = InflatedArrivals(pods, 20000, 1.3, 7);  // goal: 26 GPUs
  ASSERT_GE(arrivals.size(), 10u);
  std::vector<int> first(arrivals.begin(), arrivals.begin() + 10);
  std::vector<int> sorted = first;
  std::sort(sorted.begin(), sorted.end());
  for (int i = 0; i < 10; ++i) EXPECT_EQ(sorted[static_cast<size_t>(i)], i);  // every pod once, first
  EXPECT_NE(first, sorted);                                                   // in shuffled order
  int64_t requested = 0;
  for (int i : arrivals) requested += pods[static_cast<size_t>(i)].TotalGpuMilli();
  // The artifact compares the demand so far plus the drawn pod's per-GPU share with the goal, so
  // a two-GPU pod may end one GPU over it.
  EXPECT_LE(requested, 26000 + 1000);
  EXPECT_GT(requested + 1000, 26000);  // the next draw would have crossed the goal
  EXPECT_EQ(InflatedArrivals(pods, 20000, 1.3, 7), arrivals);
  EXPECT_NE(InflatedArrivals(pods, 20000, 1.3, 8), arrivals);
}

TEST(PlaceInflation, AListLargerThanTheGoalStopsOnePercentPastIt) {
  std::vector<PodSpec> specs;
  for (int i = 0; i < 200; ++i) specs.push_back(Spec("p" + std::to_string(i), 1000, 1, 500));
  const std::vector<Pod> pods = PodsOf(specs);  // 100 GPUs asked for
  // 50 GPUs at 1.3: goal 65 GPUs, cut once 65.5 are passed: 132 pods of half a GPU (66 GPUs).
  const std::vector<int> arrivals = InflatedArrivals(pods, 50000, 1.3, 7);
  EXPECT_EQ(arrivals.size(), 132u);
  std::set<int> distinct(arrivals.begin(), arrivals.end());
  EXPECT_EQ(distinct.size(), arrivals.size());  // a prefix of the shuffled list: no pod twice
}

Experiment OneNodeExperiment(int gpus, std::vector<PodSpec> specs) {
  return PrepareExperiment({{"n0", 64000, 262144, gpus, "T4"}}, std::move(specs));
}

TEST(PlaceExperiment, RecordsAllocatedGpusPerPercentOfArrivedDemand) {
  // One whole-GPU pod in the trace, a 4-GPU node, inflation 1.0: four arrivals at 25..100%.
  const Experiment experiment = OneNodeExperiment(4, {Spec("p0", 1000, 1, 1000)});
  RunOptions options;
  options.inflation = 1.0;
  const RunSeries run = RunOne(experiment, "BestFit", 3, options);
  EXPECT_EQ(run.arrivals, 4);
  EXPECT_EQ(run.failed_total, 0);
  EXPECT_DOUBLE_EQ(run.allocated_gpu_pct[25], 25);
  EXPECT_DOUBLE_EQ(run.allocated_gpu_pct[75], 75);
  EXPECT_DOUBLE_EQ(run.UnallocatedAt(100), 0);
  EXPECT_DOUBLE_EQ(run.allocated_gpu_pct[24], 25);  // no sample at 24%: those within 1% of it
  EXPECT_TRUE(std::isnan(run.allocated_gpu_pct[10]));
  EXPECT_DOUBLE_EQ(run.allocated_gpu_pct[0], 0);
}

TEST(PlaceExperiment, CountsFailedPodsByKind) {
  // A 1-GPU node and inflation 2.0: the second whole-GPU pod (at 200%) finds no room.
  const Experiment experiment = OneNodeExperiment(1, {Spec("p0", 1000, 1, 1000)});
  RunOptions options;
  options.inflation = 2.0;
  const RunSeries run = RunOne(experiment, "FGD", 1, options);
  EXPECT_EQ(run.arrivals, 2);
  EXPECT_EQ(run.failed_total, 1);
  EXPECT_EQ(run.failed_pods[100][static_cast<int>(PodKind::kOneGpu)], 0);
  EXPECT_EQ(run.failed_pods[200][static_cast<int>(PodKind::kOneGpu)], 1);
  EXPECT_DOUBLE_EQ(run.UnallocatedAt(200), 0);
}

TEST(PlaceExperiment, MeasuresFragmentationAmountAndRatio) {
  // A 600 share on a 1-GPU node leaves 400 that no 600 share fits: 40% of the GPUs fragmented,
  // all of the idle GPU. Before it arrives nothing is fragmented.
  const Experiment experiment = OneNodeExperiment(1, {Spec("p0", 1000, 1, 600)});
  RunOptions options;
  options.inflation = 1.0;
  const RunSeries run = RunOne(experiment, "Random", 1, options);
  EXPECT_EQ(run.arrivals, 1);
  EXPECT_DOUBLE_EQ(run.frag_gpu_pct[60], 40);
  EXPECT_DOUBLE_EQ(run.frag_ratio_pct[60], 100);
  EXPECT_DOUBLE_EQ(run.frag_gpu_pct[0], 0);
}

Experiment SmallCluster() {
  std::vector<NodeSpec> nodes;
  for (int i = 0; i < 6; ++i)
    nodes.push_back({"n" + std::to_string(i), 32000, 131072, i % 2 ? 4 : 2, i < 3 ? "T4" : "P100"});
  std::vector<PodSpec> specs;
  const int shares[] = {300, 470, 810, 1000, 1000, 250};
  for (int i = 0; i < 12; ++i) specs.push_back(Spec("p" + std::to_string(i), 2000 + 500 * (i % 3), 1, shares[i % 6]));
  specs.push_back(Spec("cpu", 6000, 0, 0));
  specs.push_back(Spec("two", 4000, 2, 1000));
  return PrepareExperiment(nodes, specs);
}

bool SameSeries(const RunSeries& a, const RunSeries& b) {
  auto same = [](const std::vector<double>& x, const std::vector<double>& y) {
    if (x.size() != y.size()) return false;
    for (size_t i = 0; i < x.size(); ++i) {
      if (!(x[i] == y[i] || (std::isnan(x[i]) && std::isnan(y[i])))) return false;
    }
    return true;
  };
  return same(a.allocated_gpu_pct, b.allocated_gpu_pct) && same(a.frag_gpu_pct, b.frag_gpu_pct) &&
         a.failed_pods == b.failed_pods;
}

TEST(PlaceExperiment, SameSeedSameResultsOnAnyNumberOfThreads) {
  const Experiment experiment = SmallCluster();
  RunOptions options;
  const std::vector<std::string> policies = {"Random", "FGD", "FGD-BF"};
  const auto one_thread = RunAll(experiment, policies, {5, 6}, options, 1, nullptr);
  const auto two_threads = RunAll(experiment, policies, {5, 6}, options, 2, nullptr);
  ASSERT_EQ(one_thread.size(), 6u);
  for (size_t i = 0; i < one_thread.size(); ++i) {
    EXPECT_EQ(one_thread[i].policy, policies[i / 2]);
    EXPECT_EQ(one_thread[i].seed, 5 + i % 2);
    EXPECT_TRUE(SameSeries(one_thread[i], two_threads[i])) << one_thread[i].policy;
  }
  // Another seed, another arrival order (and node order): the series differ.
  EXPECT_FALSE(SameSeries(one_thread[0], one_thread[1]));
}

// Two 2-GPU nodes of 16 cores; pods a and b (12 cores, one GPU) cannot share a node, so each
// node keeps one free GPU. Returns a seed whose arrival order puts the pod named "g" last.
uint64_t SeedWithLastArrival(const Experiment& experiment, double inflation) {
  for (uint64_t seed = 1; seed < 1000; ++seed) {
    const auto arrivals = InflatedArrivals(experiment.pods, experiment.cluster.total_gpu_milli, inflation, seed);
    if (arrivals.back() == static_cast<int>(experiment.pods.size()) - 1) return seed;  // "g" sorts last
  }
  ADD_FAILURE() << "no seed puts g last";
  return 0;
}

TEST(PlaceGangs, AGangMaySpanNodesWhereAMultiGpuPodCannot) {
  const Experiment experiment =
      PrepareExperiment({{"x", 16000, 65536, 2, "T4"}, {"y", 16000, 65536, 2, "T4"}},
                        {Spec("a", 12000, 1, 1000), Spec("b", 12000, 1, 1000), Spec("g", 2000, 2, 1000)});
  RunOptions options;
  options.inflation = 1.0;
  const uint64_t seed = SeedWithLastArrival(experiment, options.inflation);
  const RunSeries whole = RunOne(experiment, "BestFit", seed, options);  // the control: one node per pod
  EXPECT_EQ(whole.failed_total, 1);
  EXPECT_EQ(whole.failed_pods[100][static_cast<int>(PodKind::kTwoGpu)], 1);
  options.gangs = true;
  const RunSeries gang = RunOne(experiment, "BestFit", seed, options);
  EXPECT_EQ(gang.failed_total, 0);
  EXPECT_EQ(gang.gangs_placed, 1);
  EXPECT_EQ(gang.gang_nodes_total, 2);
  EXPECT_DOUBLE_EQ(gang.UnallocatedAt(100), 0);
}

TEST(PlaceGangs, AGangThatDoesNotFitWholeTakesNothing) {
  // c (one GPU, 2 cores) takes one of the two free GPUs; the gang's first member would fit, its
  // second not: both go back, and 3 of the 4 GPUs stay allocated.
  const Experiment experiment = PrepareExperiment({{"x", 16000, 65536, 2, "T4"}, {"y", 16000, 65536, 2, "T4"}},
                                                  {Spec("a", 12000, 1, 1000), Spec("b", 12000, 1, 1000),
                                                   Spec("c", 2000, 1, 1000), Spec("g", 2000, 2, 1000)});
  RunOptions options;
  options.inflation = 1.0;
  options.gangs = true;
  const RunSeries run = RunOne(experiment, "FGD-BF", SeedWithLastArrival(experiment, options.inflation), options);
  EXPECT_EQ(run.failed_total, 1);
  EXPECT_EQ(run.gangs_placed, 0);
  EXPECT_DOUBLE_EQ(run.allocated_gpu_pct[125], 75);  // 5 GPUs arrived on 4; the gang's took none
}

TEST(PlaceNvlink, PreferringAnIslandKeepsMultiGpuPodsOnOne) {
  // A 2-GPU and a 3-GPU pod on an idle 8-GPU node, islands of 4. The artifact's first free GPUs
  // put the second pod across the islands ({0,1} then {2,3,4}, or {0,1,2} then {3,4}): the
  // control counts one of two on one island; preferring islands keeps both.
  const Experiment experiment = OneNodeExperiment(8, {Spec("p0", 1000, 2, 1000), Spec("p1", 1000, 3, 1000)});
  RunOptions options;
  options.inflation = 0.5;
  options.nvlink_island = 4;
  options.pcie_over_nvlink = 0.1;
  RunSeries run = RunOne(experiment, "FGD", 1, options);
  EXPECT_EQ(run.island_pods, 2);
  EXPECT_EQ(run.island_pods_local, 1);
  // Pair bandwidth, NVLink 1 and PCIe 0.1: {0,1} 1 and {2,3,4} (1 + 0.1 + 0.1) / 3 = 0.4, or
  // {0,1,2} 1 and {3,4} 0.1, by arrival order.
  EXPECT_EQ(run.multi_gpu_pods, 2);
  EXPECT_TRUE(std::abs(run.pair_bandwidth_sum - 1.4) < 1e-9 || std::abs(run.pair_bandwidth_sum - 1.1) < 1e-9)
      << run.pair_bandwidth_sum;
  options.prefer_island = true;
  run = RunOne(experiment, "FGD", 1, options);
  EXPECT_EQ(run.island_pods_local, 2);
  EXPECT_DOUBLE_EQ(run.pair_bandwidth_sum, 2.0);
  // Islands of 2 hold only the 2-GPU pod, which is the only one counted.
  options.nvlink_island = 2;
  run = RunOne(experiment, "FGD", 1, options);
  EXPECT_EQ(run.island_pods, 1);
  EXPECT_EQ(run.island_pods_local, 1);
}

using testing_files::RunCli;
using testing_files::RunCommand;

TEST(PlaceCli, RunsTheExperimentAndWritesItsFiles) {
  std::string nodes = testing_files::kNodeHeader, pods = testing_files::kPodHeader5;
  for (int i = 0; i < 8; ++i) nodes += "n" + std::to_string(i) + ",32000,131072," + (i % 2 ? "4" : "2") + ",T4\n";
  const int shares[] = {300, 470, 810, 1000, 1000, 250};
  for (int i = 0; i < 30; ++i) pods += "p" + std::to_string(i) + ",2000,4096,1," + std::to_string(shares[i % 6]) + "\n";
  const std::string nodes_path = testing_files::WriteFixture("nodes.csv", nodes);
  const std::string pods_path = testing_files::WriteFixture("pods.csv", pods);
  const std::string out = ::testing::TempDir() + "/place_cli_out";
  std::filesystem::remove_all(out);
  int status = -1;
  const std::string output = RunCli("--nodes " + nodes_path + " --pods " + pods_path + " --seeds 2 --jobs 2 --out " +
                                        out + " --no-chart --title tiny",
                                    &status);
  EXPECT_EQ(status, 0) << output;
  EXPECT_THAT(output, HasSubstr("| FGD | 2 |"));
  EXPECT_THAT(output, HasSubstr("| FGD-BF | 2 |"));
  EXPECT_THAT(output, HasSubstr("| FirstFit | 2 |"));
  EXPECT_THAT(output, HasSubstr("| Spread | 2 |"));
  EXPECT_THAT(output, HasSubstr("| FGD-BF-S | 2 |"));
  EXPECT_THAT(output, HasSubstr("| FGD-BF-C | 2 |"));
  EXPECT_THAT(output, HasSubstr("| FGD-BF-H | 2 |"));
  EXPECT_THAT(output, HasSubstr("| FGD-BF-M | 2 |"));
  EXPECT_THAT(output, HasSubstr("| FGD-BF-G | 2 |"));
  EXPECT_THAT(output, HasSubstr("28/28 runs done"));  // the progress line: 14 policies x 2 seeds
  for (const char* file :
       {"metrics.csv", "summary.md", "unallocated.dat", "unallocated.gp", "stranded.dat", "stranded.gp"}) {
    EXPECT_TRUE(std::filesystem::exists(out + "/" + file)) << file;
  }
  std::ifstream csv(out + "/metrics.csv");
  std::string header;
  std::getline(csv, header);
  EXPECT_THAT(header, HasSubstr("policy,seed,arrived_gpu_pct,allocated_gpu_pct,unallocated_gpu_pct,frag_gpu_pct"));
  EXPECT_THAT(header, HasSubstr(",stranded_gpu_pct,"));
}

TEST(PlaceCli, BadInputExitsWithTheFileLineAndColumn) {
  const std::string nodes_path =
      testing_files::WriteFixture("nodes.csv", std::string(testing_files::kNodeHeader) + "n0,32000,131072,2,T4\n");
  const std::string pods_path = testing_files::WriteFixture("pods.csv", std::string(testing_files::kPodHeader5) +
                                                                            "p0,2000,4096,1,300\np1,2000,-4,1,300\n");
  int status = -1;
  std::string output = RunCli("--nodes " + nodes_path + " --pods " + pods_path + " --quiet", &status);
  EXPECT_EQ(status, 2);
  EXPECT_THAT(output, HasSubstr("pods.csv:3:3: memory_mib must not be negative"));
  output = RunCli("--nodes " + nodes_path + " --pods " + pods_path + " --policies FGD,Nope --quiet", &status);
  EXPECT_EQ(status, 2);
  EXPECT_THAT(output, HasSubstr("unknown policy 'Nope'"));
  const std::string five_columns =
      testing_files::WriteFixture("five.csv", std::string(testing_files::kPodHeader5) + "p0,2000,4096,1,300\n");
  // Options that do not go together, or name what is not there: exit status 2 and one line.
  const std::pair<const char*, const char*> refusals[] = {
      {"--tiers qos", "--tiers qos needs the qos column"},
      {"--mig-nodes n0 --mig-isolate", "--mig-isolate needs --tiers qos or --tiers random"},
      {"--mig-nodes n9", "--mig-nodes: no node is named 'n9' in "},
      {"--mig-nodes n0 --mig-layout 4g.40gb,4g.40gb", "--mig-layout: "},
      {"--pcie-gbps 64", "--nvlink-gbps and --pcie-gbps need --nvlink-island N"},
      {"--no-such-option", "--no-such-option"},  // the command line's own errors: 2, as every tool's
  };
  for (const auto& [options, message] : refusals) {
    output = RunCli("--nodes " + nodes_path + " --pods " + five_columns + " " + options + " --quiet", &status);
    EXPECT_EQ(status, 2) << options;
    EXPECT_THAT(output, HasSubstr(message)) << options;
  }
  // An out-of-range value: CLI11's own usage error.
  output =
      RunCli("--nodes " + nodes_path + " --pods " + five_columns + " --nvlink-island 4 --pcie-gbps 0 --quiet", &status);
  EXPECT_NE(status, 0);
  EXPECT_THAT(output, HasSubstr("--pcie-gbps"));
}

TEST(PlaceCli, WarnsOncePerClassOfImpossiblePods) {
  std::string nodes = testing_files::kNodeHeader, pods = testing_files::kPodHeader5;
  for (int i = 0; i < 4; ++i) nodes += "n" + std::to_string(i) + ",32000,131072,2,T4\n";
  for (int i = 0; i < 12; ++i) pods += "p" + std::to_string(i) + ",2000,4096,1,500\n";
  for (int i = 0; i < 3; ++i) pods += "q" + std::to_string(i) + ",2000,4096,4,1000\n";
  pods += "r0,999999000,4096,0,0\n";
  int status = -1;
  const std::string output = RunCli("--nodes " + testing_files::WriteFixture("nodes.csv", nodes) + " --pods " +
                                        testing_files::WriteFixture("pods.csv", pods) +
                                        " --seeds 1 --jobs 1 --policies FGD --quiet",
                                    &status);
  EXPECT_EQ(status, 0) << output;
  EXPECT_THAT(output, HasSubstr("pods.csv:14: 3 pods (the first q0) ask for 4 GPUs x 1000 milli-GPU, 2 cores, 4096 "
                                "MiB, which no node can hold: the most GPUs a node of its models has is 2"));
  EXPECT_THAT(output, HasSubstr("pods.csv:17: 1 pod (r0) asks for no GPU, 999999 cores, 4096 MiB, which no node can "
                                "hold: the most cores a node has is 32"));
  EXPECT_EQ(output.find("warning", output.find("warning", output.find("warning") + 1) + 1), std::string::npos)
      << "one line per class: " << output;
}

TEST(PlaceCli, ANodeListWithoutGpusIsAnError) {
  std::string nodes = testing_files::kNodeHeader, pods = testing_files::kPodHeader5;
  for (int i = 0; i < 4; ++i) nodes += "n" + std::to_string(i) + ",32000,131072,0,\n";
  pods += "p0,2000,4096,1,500\n";
  int status = -1;
  const std::string output = RunCli("--nodes " + testing_files::WriteFixture("nodes.csv", nodes) + " --pods " +
                                        testing_files::WriteFixture("pods.csv", pods) + " --seeds 1 --quiet",
                                    &status);
  EXPECT_EQ(status, 2) << output;
  EXPECT_THAT(output, HasSubstr("nodes.csv: none of its 4 nodes has a GPU"));
  EXPECT_EQ(output.find("100.00"), std::string::npos) << output;
}

TEST(PlaceCli, AMigRunReportsIsolatedPodsAndInstances) {
  std::string nodes = testing_files::kNodeHeader, pods = testing_files::kPodHeader11;
  for (int i = 0; i < 4; ++i) nodes += "n" + std::to_string(i) + ",32000,131072,2,T4\n";
  for (int i = 0; i < 12; ++i) {
    pods += "p" + std::to_string(i) + ",2000,4096,1," + (i % 2 ? "300,,LS" : "500,,BE") + ",Running,0,10,0\n";
  }
  const std::string nodes_path = testing_files::WriteFixture("nodes.csv", nodes);
  const std::string pods_path = testing_files::WriteFixture("pods.csv", pods);
  int status = -1;
  const std::string output = RunCli("--nodes " + nodes_path + " --pods " + pods_path +
                                        " --seeds 1 --policies FGD --tiers qos --mig-nodes n0 --mig-isolate --quiet",
                                    &status);
  EXPECT_EQ(status, 0) << output;
  EXPECT_THAT(output, HasSubstr("| Isolated pods (arrived) | Isolated failed | MIG instances |"));
  EXPECT_THAT(output, HasSubstr(" | 8 | "));  // n0: 2 GPUs x (3g + 2g + 1g + 1g)
}

// scripts/share-packing-bound.py, the offline reference docs/placement.md compares FGD-BF-H with.
TEST(PlaceShareBound, PacksTheLargestShareFirstIntoTheTightestHole) {
  // Shares 810, 600, 400, 300, 190 (the whole GPU and the 2-GPU pod are not shares). 810 opens a
  // GPU (hole 190), 600 another (400), 400 fills that 400, 300 opens a third (700), 190 fills the
  // 190: three GPUs, one hole of 700.
  const std::string pods =
      testing_files::WriteFixture("bound.csv",
                                  std::string(testing_files::kPodHeader5) +
                                      "a,1000,1024,1,190\nb,1000,1024,1,810\nc,1000,1024,1,400\nd,1000,1024,1,1000\n"
                                      "e,1000,1024,1,600\nf,1000,1024,2,1000\ng,1000,1024,1,300\n");
  const std::string script = std::string("python3 ") + GPUSLICE_SOURCE_DIR + "/scripts/share-packing-bound.py ";
  int status = -1;
  std::string output = RunCommand(script + pods + " --gpus 10", &status);
  EXPECT_EQ(status, 0) << output;
  EXPECT_THAT(output, HasSubstr("5 shares asking 2.3 GPUs take 3 GPUs packed offline (best-fit decreasing); "
                                "holes 0.7 GPUs = 7.00% of 10\n"));
  EXPECT_THAT(output, HasSubstr("holes by size (milli-GPU: GPUs): 700: 1\n"));
  // A list without the GPU columns is refused, naming the file.
  const std::string bad = testing_files::WriteFixture("bound-bad.csv", "name,cpu_milli\na,1000\n");
  output = RunCommand(script + bad, &status);
  EXPECT_NE(status, 0);
  EXPECT_THAT(output, HasSubstr("bound-bad.csv: no column 'num_gpu' in the header"));
}

TEST(PlaceGeneralisation, TabulatesEveryListAndReplaysThoseWithTimes) {
  // Two pod lists beside a node list: "timed" has the trace's times, "untimed" (5 columns) not.
  const std::string dir = ::testing::TempDir() + "/place_generalisation_data";
  const std::string out = ::testing::TempDir() + "/place_generalisation_out";
  std::filesystem::remove_all(dir);
  std::filesystem::remove_all(out);
  std::filesystem::create_directories(dir);
  std::string nodes = testing_files::kNodeHeader, timed = testing_files::kPodHeader11,
              untimed = testing_files::kPodHeader5;
  for (int i = 0; i < 6; ++i) nodes += "n" + std::to_string(i) + ",32000,131072,2,T4\n";
  for (int i = 0; i < 20; ++i) {
    const std::string shape = i % 3 ? ",2000,4096,1,500" : ",4000,8192,1,1000";
    timed += "p" + std::to_string(i) + shape + ",,LS,Running," + std::to_string(i * 10) + "," +
             std::to_string(i * 10 + 500) + "," + std::to_string(i * 10) + "\n";
    untimed += "p" + std::to_string(i) + shape + "\n";
  }
  std::ofstream(dir + "/openb_node_list_gpu_node.csv") << nodes;
  std::ofstream(dir + "/openb_pod_list_timed.csv") << timed;
  std::ofstream(dir + "/openb_pod_list_untimed.csv") << untimed;
  int status = -1;
  const std::string output = RunCommand(std::string("cd ") + GPUSLICE_SOURCE_DIR + " && PLACE=" + GPUSLICE_PLACE_CLI +
                                            " SEEDS=2 REPLAY_SEEDS=1 JOBS=1 scripts/place-generalisation.sh " + dir +
                                            " " + out,
                                        &status);
  EXPECT_EQ(status, 0) << output;
  EXPECT_THAT(output, HasSubstr("| List | 50% | 70% | 90% | 100% | 110% | 130% |"));
  EXPECT_THAT(output, HasSubstr("| timed |"));
  EXPECT_THAT(output, HasSubstr("| untimed |"));
  EXPECT_THAT(output, HasSubstr("of 2 |"));                    // seeds where ours is below at 100%, of 2
  EXPECT_EQ(output.find("nan"), std::string::npos) << output;  // a level without samples is "–"
  // The replay table: the timed list only.
  const size_t replay = output.find("FIFO replay");
  ASSERT_NE(replay, std::string::npos) << output;
  EXPECT_THAT(output.substr(replay), HasSubstr("| timed |"));
  EXPECT_EQ(output.substr(replay).find("| untimed |"), std::string::npos) << output;
  EXPECT_THAT(output, HasSubstr("done in"));  // the progress line
  EXPECT_TRUE(std::filesystem::exists(out + "/report.md"));
}

}  // namespace
}  // namespace gpuslice::place
