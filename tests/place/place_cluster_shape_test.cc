// Random cluster shapes (place/cluster_shape.h): the spec's fields and their errors, each
// family's bounds, the seed deciding everything it does not fix; --random-cluster end to end; and
// scripts/place-random-clusters.py on a small run.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "place/cluster_shape.h"
#include "place_test_files.h"

namespace gpuslice::place {
namespace {

using ::testing::HasSubstr;
using testing_files::RunCli;
using testing_files::RunCommand;

ClusterShape Shape(const std::string& text) {
  auto spec = ParseShapeSpec(text);
  EXPECT_TRUE(spec.ok()) << spec.message();
  return MakeClusterShape(spec.ok() ? *spec : ShapeSpec{});
}

TEST(PlaceClusterShape, EachFamilyStaysWithinItsBounds) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    for (const std::string& family : ShapeFamilies()) {
      const ClusterShape shape = Shape("seed=" + std::to_string(seed) + ",family=" + family);
      EXPECT_EQ(shape.family, family);
      std::set<std::string> models;
      std::set<std::pair<int, int64_t>> types;
      int gpus = 0, cpu_nodes = 0;
      for (const NodeSpec& node : shape.nodes) {
        gpus += node.gpus;
        if (node.gpus == 0) {
          ++cpu_nodes;
          continue;
        }
        models.insert(node.model);
        types.emplace(node.gpus, node.cpu_milli);
        EXPECT_GE(node.cpu_milli, 2000);
        if (family == "big-nodes") {
          EXPECT_GE(node.gpus, 8) << shape.description;
        }
        if (family == "small-nodes") {
          EXPECT_LE(node.gpus, 4) << shape.description;
        }
        if (family == "mixed" || family == "cpu-nodes") {
          EXPECT_LE(node.gpus, 8) << shape.description;
        }
      }
      EXPECT_GE(gpus, 1400) << shape.description;  // 1,500-6,500 drawn, each type rounded to whole nodes
      EXPECT_LE(gpus, 6700) << shape.description;
      EXPECT_EQ(cpu_nodes > 0, family == "cpu-nodes") << shape.description;
      if (family == "homogeneous") {
        EXPECT_EQ(models.size(), 1u);
        EXPECT_EQ(types.size(), 1u);
      }
    }
  }
}

TEST(PlaceClusterShape, TheSeedDecidesWhatTheSpecLeavesOpen) {
  EXPECT_EQ(NodeListCsv(Shape("seed=7").nodes), NodeListCsv(Shape("seed=7").nodes));
  EXPECT_NE(NodeListCsv(Shape("seed=7").nodes), NodeListCsv(Shape("seed=8").nodes));
  std::set<std::string> families;
  for (uint64_t seed = 1; seed <= 40; ++seed) families.insert(Shape("seed=" + std::to_string(seed)).family);
  EXPECT_EQ(families.size(), ShapeFamilies().size());
  // Every dimension fixed: 10 GPU nodes of 16 G2 GPUs with 12 cores and 64 GiB each, and as many
  // nodes without GPUs.
  const ClusterShape fixed =
      Shape("seed=3,nodes=10,gpus=16,models=G2,cpu-nodes=0.5,cores-per-gpu=12,memory-per-gpu=64");
  ASSERT_EQ(fixed.nodes.size(), 20u);
  for (size_t i = 0; i < 10; ++i) {
    EXPECT_EQ(fixed.nodes[i].gpus, 16);
    EXPECT_EQ(fixed.nodes[i].model, "G2");
    EXPECT_EQ(fixed.nodes[i].cpu_milli, 192000);
    EXPECT_EQ(fixed.nodes[i].memory_mib, 16 * 64 * 1024);
  }
  for (size_t i = 10; i < 20; ++i) EXPECT_EQ(fixed.nodes[i].gpus, 0);
  // Two node types and two models: the types take the models in turn.
  const ClusterShape two = Shape("seed=3,nodes=100,gpus=1|8,models=T4|A10");
  std::set<std::pair<int, std::string>> types;
  for (const NodeSpec& node : two.nodes) types.emplace(node.gpus, node.model);
  EXPECT_EQ(types, (std::set<std::pair<int, std::string>>{{1, "T4"}, {8, "A10"}}));
  EXPECT_EQ(two.nodes.size(), 100u);
}

TEST(PlaceClusterShape, ABadSpecNamesTheFieldAndWhatIsValid) {
  const std::pair<const char*, const char*> cases[] = {
      {"seed=x", "'seed=x' is not valid; seed= takes a whole number"},
      {"family=tiny", "family= takes one of mixed, homogeneous, cpu-nodes, big-nodes, small-nodes"},
      {"gpus=8|17", "gpus= takes GPU counts from 1 to 16"},
      {"nodes=0", "nodes= takes a whole number of GPU nodes from 1 to 100000"},
      {"cpu-nodes=1", "cpu-nodes= takes the share of nodes without GPUs, from 0 to 0.9"},
      {"models=", "models= takes GPU model names"},
      {"colour=red", "fields are seed=, family=, nodes="},
  };
  for (const auto& [text, message] : cases) {
    auto spec = ParseShapeSpec(text);
    ASSERT_FALSE(spec.ok()) << text;
    EXPECT_THAT(spec.message(), HasSubstr(message)) << text;
  }
}

TEST(PlaceClusterShape, ARandomClusterRunsAndIsWrittenAsANodeList) {
  std::string pods = testing_files::kPodHeader5;
  for (int i = 0; i < 30; ++i) pods += "p" + std::to_string(i) + ",4000,8192,1," + (i % 3 ? "500" : "1000") + "\n";
  const std::string pods_path = testing_files::WriteFixture("pods.csv", pods);
  const std::string written = ::testing::TempDir() + "/place_random_cluster_nodes.csv";
  const std::string common = " --pods " + pods_path + " --seeds 1 --jobs 1 --policies FGD,FGD-BF-M --quiet --no-chart";
  int status = -1;
  const std::string drawn =
      RunCli("--random-cluster seed=5,family=homogeneous,nodes=6 --write-nodes " + written + common, &status);
  EXPECT_EQ(status, 0) << drawn;
  EXPECT_THAT(drawn, HasSubstr("Cluster shape: random, homogeneous (seed 5): 6 x "));
  // The written node list gives the same run.
  const std::string read = RunCli("--nodes " + written + common, &status);
  EXPECT_EQ(status, 0) << read;
  const auto table = [](const std::string& s) {
    return s.substr(s.find("| Policy"), s.find("Cluster:") - s.find("| Policy"));
  };
  EXPECT_EQ(table(drawn).substr(0, table(drawn).find("Seconds")), table(read).substr(0, table(read).find("Seconds")));
  const std::string neither = RunCli("--pods " + pods_path + " --quiet", &status);
  EXPECT_EQ(status, 2);
  EXPECT_THAT(neither, HasSubstr("give the cluster as one of --nodes FILE or --random-cluster SPEC"));
  const std::string bad = RunCli("--random-cluster gpus=99 --pods " + pods_path + " --quiet", &status);
  EXPECT_EQ(status, 2);
  EXPECT_THAT(bad, HasSubstr("--random-cluster: 'gpus=99' is not valid"));
}

TEST(PlaceRandomClusters, TheScriptCountsCellsWorseThanTheBasePerFamily) {
  const std::string dir = ::testing::TempDir() + "/place_random_clusters_data";
  const std::string out = ::testing::TempDir() + "/place_random_clusters_out";
  std::filesystem::remove_all(dir);
  std::filesystem::remove_all(out);
  std::filesystem::create_directories(dir);
  std::string nodes = testing_files::kNodeHeader, pods = testing_files::kPodHeader5;
  for (int i = 0; i < 4; ++i) nodes += "g" + std::to_string(i) + ",32000,131072,4,T4\n";
  nodes += "c0,32000,131072,0,\n";
  for (int i = 0; i < 20; ++i) pods += "p" + std::to_string(i) + ",4000,8192,1," + (i % 3 ? "500" : "1000") + "\n";
  std::ofstream(dir + "/openb_node_list_all_node.csv") << nodes;
  std::ofstream(dir + "/openb_pod_list_tiny.csv") << pods;
  int status = -1;
  const std::string output = RunCommand(std::string("cd ") + GPUSLICE_SOURCE_DIR + " && python3 " +
                                            "scripts/place-random-clusters.py " + dir + " --out " + out + " --place " +
                                            GPUSLICE_PLACE_CLI +
                                            " --clusters 2 --families mixed,cpu-nodes --shape nodes=100 --seeds 1"
                                            " --cluster-seed 11 --jobs 1",
                                        &status);
  EXPECT_EQ(status, 0) << output;
  EXPECT_THAT(output, HasSubstr("cluster seed 11 (--cluster-seed to change it)"));
  EXPECT_THAT(output, HasSubstr("| mixed | 1 | 5 |"));  // one cluster, one list, five levels
  EXPECT_THAT(output, HasSubstr("| cpu-nodes | 1 | 5 |"));
  EXPECT_THAT(output, HasSubstr("| **all** | 2 | 10 |"));
  EXPECT_THAT(output, HasSubstr("| c01 | cpu-nodes | cpu-nodes (seed 12): "));
  EXPECT_THAT(output, HasSubstr("- FGD-BF-G: cells no worse than FGD by more than 0.1: "));
  EXPECT_THAT(output, HasSubstr("| tiny | "));  // the all-node table
  EXPECT_TRUE(std::filesystem::exists(out + "/report.md"));
}

}  // namespace
}  // namespace gpuslice::place
