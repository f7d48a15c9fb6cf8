// The latency class on pairs nobody tuned it on: gpuslice-bench latency-sweep's generator, a fresh
// seed at every run (printed, to rerun the same pairs with --seed), fewer pairs and shorter runs
// than the benchmark, and bounds loose enough for a loaded 2-core machine. Each pair — a latency
// service within its request beside a co-runner of drawn kernels, depth, processes, class and
// limit — runs alone, unmanaged and under gpuslice. What is checked, in every pair: the service's
// p99 not far above the unmanaged one (the contract: at most it, docs/scheduling.md), and the
// co-runner keeping most of its unmanaged device time. The class's own effect has its controls
// in sched_real_tenants_test (the same service declared standard) and the `latency-class-waits`
// sabotage of scripts/mutation-check.sh.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "tests/support/subprocess.h"
#include "tests/support/test_env.h"

namespace gpuslice::testing {
namespace {

using Json = nlohmann::json;

constexpr int kPairs = 4;
// Loose: p99 within 1.5 x unmanaged + 1 ms (the benchmark's target is 1.1 x, and at most
// unmanaged in 38 of 40 pairs); the co-runner at least 80% of its entitled time (target 90%).
constexpr double kP99OverUnmanagedAtMost = 1.5;
constexpr double kP99SlackMs = 1.0;
constexpr double kCorunnerTimeAtLeast = 0.80;

TEST(SchedLatencySweepTest, RandomPairsKeepTheServiceTailNearUnmanagedAndTheCorunnersTime) {
  const unsigned seed = std::random_device{}() % 1'000'000 + 1;
  std::printf("latency-sweep seed %u (rerun: gpuslice-bench latency-sweep --seed %u --pairs %d)\n", seed, seed, kPairs);
  char pattern[] = "/tmp/gpuslice-sweep-test-XXXXXX";
  const std::string report = mkdtemp(pattern);
  const ProcessResult r =
      gpuslice::testing::Run({BinDir() + "/gpuslice-bench", "latency-sweep", "--seed", std::to_string(seed), "--pairs",
                              std::to_string(kPairs), "--duration", "2", "--quiet", "--report", report},
                             {}, 600000);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  std::printf("%s\n", r.out.c_str());
  std::ifstream in(report + "/latency-sweep/results-" + std::to_string(seed) + ".json");
  const Json results = Json::parse(in);
  std::filesystem::remove_all(report);
  ASSERT_EQ(results["pairs"].size(), static_cast<size_t>(kPairs));
  for (const Json& pair : results["pairs"]) {
    const double unmanaged = pair["p99_ms"]["unmanaged"], gpuslice = pair["p99_ms"]["gpuslice"];
    EXPECT_LE(gpuslice, kP99OverUnmanagedAtMost * unmanaged + kP99SlackMs) << pair["description"];
    const double entitled = pair["corunner_time"]["entitled"], kept = pair["corunner_time"]["gpuslice"];
    EXPECT_GE(kept, kCorunnerTimeAtLeast * entitled) << pair["description"];
  }
}

}  // namespace
}  // namespace gpuslice::testing
