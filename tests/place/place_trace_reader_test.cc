// The trace readers: both pod formats, the node list, and one clear error (file:line:column)
// for every kind of bad input.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "place/trace.h"
#include "place_test_files.h"

namespace gpuslice::place {
namespace {

using ::testing::HasSubstr;
using testing_files::kNodeHeader;
using testing_files::kPodHeader11;
using testing_files::kPodHeader5;
using testing_files::WriteFixture;

std::string NodeError(const std::string& text) {
  auto result = ReadNodeList(WriteFixture("nodes.csv", text));
  EXPECT_FALSE(result.ok()) << "accepted:\n" << text;
  return !result.ok() ? result.message() : "";
}

std::string PodError(const std::string& text) {
  auto result = ReadPodList(WriteFixture("pods.csv", text));
  EXPECT_FALSE(result.ok()) << "accepted:\n" << text;
  return !result.ok() ? result.message() : "";
}

TEST(PlaceTraceReader, ReadsNodesWithAndWithoutGpus) {
  auto result = ReadNodeList(
      WriteFixture("nodes.csv",
                   std::string(kNodeHeader) + "n0,64000,262144,2,P100\nn1,32000,65536,0,nan\nn2,96000,393216,8,G2\n"));
  ASSERT_TRUE(result.ok()) << result.message();
  const auto& nodes = *result;
  ASSERT_EQ(nodes.size(), 3u);
  EXPECT_EQ(nodes[0].name, "n0");
  EXPECT_EQ(nodes[0].cpu_milli, 64000);
  EXPECT_EQ(nodes[0].memory_mib, 262144);
  EXPECT_EQ(nodes[0].gpus, 2);
  EXPECT_EQ(nodes[0].model, "P100");
  EXPECT_EQ(nodes[1].model, "");  // "nan": a node without GPUs
  EXPECT_EQ(nodes[2].gpus, 8);
}

TEST(PlaceTraceReader, ReadsTheElevenColumnPodList) {
  auto result = ReadPodList(
      WriteFixture("pods.csv", std::string(kPodHeader11) +
                                   "p0,12000,16384,1,1000,,LS,Running,0,12537496,0\n"
                                   "p1,6000,12288,1,460,V100M16|V100M32,LS,Running,427061,,427061\r\n"
                                   "p2,88000,327680,8,1000,nan,Burstable,Succeeded,9437497,10769854,9437497\n"
                                   "p3,8000,30517,0,0,,BE,Running,1,2,1\n"));
  ASSERT_TRUE(result.ok()) << result.message();
  const auto& pods = *result;
  ASSERT_EQ(pods.size(), 4u);
  EXPECT_TRUE(pods[0].gpu_models.empty());
  EXPECT_EQ(pods[0].creation_time, 0);
  EXPECT_EQ(pods[0].deletion_time, 12537496);
  EXPECT_EQ(pods[1].gpu_milli, 460);
  EXPECT_TRUE(pods[1].IsFractional());
  EXPECT_EQ(pods[1].gpu_models, (std::vector<std::string>{"V100M16", "V100M32"}));
  EXPECT_EQ(pods[1].deletion_time, -1);  // empty: unknown
  EXPECT_EQ(pods[2].TotalGpuMilli(), 8000);
  EXPECT_TRUE(pods[2].gpu_models.empty());  // "nan": any model
  EXPECT_EQ(pods[3].num_gpu, 0);
  EXPECT_EQ(pods[3].line, 5);
}

TEST(PlaceTraceReader, ReadsTheFiveColumnPodList) {
  auto result =
      ReadPodList(WriteFixture("pods.csv", std::string(kPodHeader5) + "p0,12000,16384,2,1000\np1,6000,12288,1,460\n"));
  ASSERT_TRUE(result.ok()) << result.message();
  const auto& pods = *result;
  ASSERT_EQ(pods.size(), 2u);
  EXPECT_EQ(pods[0].num_gpu, 2);
  EXPECT_EQ(pods[1].creation_time, -1);
  EXPECT_TRUE(pods[1].gpu_models.empty());
}

TEST(PlaceTraceReader, EmptyFileIsAnError) {
  EXPECT_THAT(PodError(""), HasSubstr("pods.csv:1:1: the file is empty"));
  EXPECT_THAT(NodeError("\n\n"), HasSubstr("nodes.csv:1:1: the file is empty"));
}

TEST(PlaceTraceReader, HeaderWithoutRowsIsAnError) {
  EXPECT_THAT(PodError(kPodHeader5), HasSubstr("pods.csv:2:1: no rows after the header"));
}

TEST(PlaceTraceReader, MissingFileIsAnError) {
  auto result = ReadNodeList("/nonexistent/dir/nodes.csv");
  ASSERT_FALSE(result.ok());
  EXPECT_THAT(result.message(), HasSubstr("/nonexistent/dir/nodes.csv: cannot open"));
}

TEST(PlaceTraceReader, MissingColumnNamesTheColumn) {
  EXPECT_THAT(PodError("name,cpu_milli,memory_mib,num_gpu\np0,1,1,0\n"),
              HasSubstr("pods.csv:1:5: missing column 'gpu_milli'"));
  EXPECT_THAT(NodeError("sn,cpu_milli,gpu,model\nn0,1,0,\n"), HasSubstr("nodes.csv:1:5: missing column 'memory_mib'"));
}

TEST(PlaceTraceReader, RowWithMissingFieldsNamesLineAndColumn) {
  EXPECT_THAT(PodError(std::string(kPodHeader5) + "p0,1000,1024,1,500\np1,1000,1024\n"),
              HasSubstr("pods.csv:3:4: expected 5 fields as in the header, found 3"));
}

TEST(PlaceTraceReader, NegativeSizesAreErrors) {
  EXPECT_THAT(PodError(std::string(kPodHeader5) + "p0,-1000,1024,1,500\n"),
              HasSubstr("pods.csv:2:2: cpu_milli must not be negative, found -1000"));
  EXPECT_THAT(PodError(std::string(kPodHeader5) + "p0,1000,-5,1,500\n"),
              HasSubstr("pods.csv:2:3: memory_mib must not be negative"));
  EXPECT_THAT(NodeError(std::string(kNodeHeader) + "n0,64000,262144,-2,P100\n"),
              HasSubstr("nodes.csv:2:4: gpu must not be negative"));
}

TEST(PlaceTraceReader, NonNumbersAreErrors) {
  EXPECT_THAT(PodError(std::string(kPodHeader5) + "p0,12x,1024,1,500\n"),
              HasSubstr("pods.csv:2:2: cpu_milli must be a whole number, found '12x'"));
  EXPECT_THAT(NodeError(std::string(kNodeHeader) + "n0,64000,,2,P100\n"),
              HasSubstr("nodes.csv:2:3: memory_mib must be a whole number, found ''"));
}

TEST(PlaceTraceReader, SizesOutOfRangeAreErrors) {
  EXPECT_THAT(PodError(std::string(kPodHeader5) + "p0,1000,1024,17,1000\n"),
              HasSubstr("pods.csv:2:4: num_gpu 17 is above the largest valid value 16"));
  EXPECT_THAT(NodeError(std::string(kNodeHeader) + "n0,64000,262144,17,H100\n"),
              HasSubstr("nodes.csv:2:4: gpu 17 is above the largest valid value 16"));
  EXPECT_THAT(PodError(std::string(kPodHeader5) + "p0,1000,1024,1,1500\n"),
              HasSubstr("pods.csv:2:5: gpu_milli 1500 is above the largest valid value 1000"));
  EXPECT_THAT(PodError(std::string(kPodHeader5) + "p0,1000,1024,2,500\n"),
              HasSubstr("pods.csv:2:5: only a one-GPU pod may ask for a fraction"));
  EXPECT_THAT(PodError(std::string(kPodHeader5) + "p0,1000,1024,1,0\n"),
              HasSubstr("pods.csv:2:5: a pod asking for 1 GPU"));
  EXPECT_THAT(PodError(std::string(kPodHeader5) + "p0,1000,1024,0,300\n"),
              HasSubstr("pods.csv:2:5: gpu_milli 300 given for a pod with num_gpu 0"));
}

TEST(PlaceTraceReader, NodeWithGpusNeedsAModel) {
  EXPECT_THAT(NodeError(std::string(kNodeHeader) + "n0,64000,262144,2,\n"),
              HasSubstr("nodes.csv:2:5: a node with GPUs needs its GPU model"));
  EXPECT_THAT(NodeError(std::string(kNodeHeader) + "n0,64000,262144,2,T4\nn0,64000,262144,2,T4\n"),
              HasSubstr("nodes.csv:3:1: node 'n0' listed twice"));
}

}  // namespace
}  // namespace gpuslice::place
