// The reserved whole-node pool: which nodes it takes, big pods first there, small pods only as
// backfill that a big pod reclaims; the control is the same replay without a pool.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "place/pool.h"
#include "place/replay.h"
#include "place_test_files.h"

namespace gpuslice::place {
namespace {

using testing_files::TimedPod;

TEST(PlacePool, AFractionTakesWholeNodesBigEnoughAndNamesTakeThose) {
  std::vector<NodeSpec> specs;
  for (int n = 0; n < 10; ++n) specs.push_back({"n" + std::to_string(n), 64000, 262144, n % 2 ? 8 : 2, "A100"});
  Cluster cluster = BuildCluster(specs);  // 5 x 8 + 5 x 2 = 50 GPUs
  std::vector<std::string> names;
  for (const NodeSpec& s : specs) names.push_back(s.name);
  PoolOptions options;
  options.fraction = 0.3;  // 15 GPUs: two 8-GPU nodes
  EXPECT_EQ(MarkPool(cluster, names, options), "");
  int pool_gpus = 0, pool_nodes = 0;
  for (const NodeState& node : cluster.nodes) {
    if (!node.pool) continue;
    EXPECT_EQ(node.gpus, 8);  // the 2-GPU nodes cannot hold a 4-GPU pod
    pool_gpus += node.gpus;
    ++pool_nodes;
  }
  EXPECT_EQ(pool_nodes, 2);
  EXPECT_EQ(pool_gpus, 16);
  options.nodes = {"n2", "n3"};
  EXPECT_EQ(MarkPool(cluster, names, options), "");
  EXPECT_TRUE(cluster.nodes[2].pool && cluster.nodes[3].pool);
  EXPECT_EQ(std::count_if(cluster.nodes.begin(), cluster.nodes.end(), [](const NodeState& n) { return n.pool; }), 2);
  options.nodes = {"n99"};
  EXPECT_EQ(MarkPool(cluster, names, options), "--pool-nodes: no node is named 'n99'");
}

// A 4-GPU pool node and a 2-GPU shared node. a and b (1 GPU each, to 1000) fill the shared node;
// d (1 GPU, 1 to 101) fits only on the pool node, as backfill; e (4 GPUs, 2 to 52) fits nowhere
// until d leaves. With the pool, e reclaims the node at once: d is evicted and runs again after
// e (52 to 152). Without it, e waits at least until d ends at 101, whatever the policy (three
// 1-GPU pods cannot all sit on the 2-GPU node).
Experiment PoolScenario() {
  return PrepareExperiment({{"pool", 32000, 131072, 4, "A100"}, {"shared", 32000, 131072, 2, "A100"}},
                           {TimedPod("a", 1, 0, 1000), TimedPod("b", 1, 0, 1000), TimedPod("d", 1, 1, 101),
                            TimedPod("e", 4, 2, 52)});
}

TEST(PlacePool, ABigPodReclaimsItsPoolNodeFromBackfill) {
  for (const char* policy : {"FirstFit", "Spread", "FGD"}) {
    for (uint64_t seed = 1; seed <= 3; ++seed) {
      ReplayOptions options;
      options.backfill = true;
      const ReplayResult control = Replay(PoolScenario(), policy, seed, options);
      EXPECT_EQ(control.big_started, 1);
      EXPECT_GE(control.big_mean_wait_s, 99) << policy;  // 998 where a or b took the 4-GPU node
      EXPECT_EQ(control.evictions, 0);

      options.pool.nodes = {"pool"};
      const ReplayResult pooled = Replay(PoolScenario(), policy, seed, options);
      EXPECT_EQ(pooled.pool_gpus, 4);
      EXPECT_DOUBLE_EQ(pooled.big_mean_wait_s, 0) << policy << " seed " << seed;
      EXPECT_EQ(pooled.evictions, 1);
      EXPECT_NEAR(pooled.evicted_gpu_hours, 1.0 / 3600, 1e-12);  // d had run 1 s on 1 GPU
      EXPECT_EQ(pooled.never_started, 0);
      EXPECT_DOUBLE_EQ(pooled.mean_wait_s, (0 + 0 + 51 + 0) / 4.0);  // d waits from 1 to its restart at 52
    }
  }
}

TEST(PlacePool, SmallPodsTakeSharedNodesFirst) {
  // Spread alone would put a on the emptier pool node; with the pool, a and b go to the shared
  // node and nothing needs reclaiming for a big pod that arrives while they run.
  const Experiment experiment =
      PrepareExperiment({{"pool", 32000, 131072, 4, "A100"}, {"shared", 32000, 131072, 2, "A100"}},
                        {TimedPod("a", 1, 0, 1000), TimedPod("b", 1, 0, 1000), TimedPod("e", 4, 2, 52)});
  ReplayOptions options;
  const ReplayResult control = Replay(experiment, "Spread", 1, options);
  EXPECT_GT(control.big_mean_wait_s, 0);
  options.pool.nodes = {"pool"};
  const ReplayResult pooled = Replay(experiment, "Spread", 1, options);
  EXPECT_DOUBLE_EQ(pooled.big_mean_wait_s, 0);
  EXPECT_EQ(pooled.evictions, 0);
}

}  // namespace
}  // namespace gpuslice::place
