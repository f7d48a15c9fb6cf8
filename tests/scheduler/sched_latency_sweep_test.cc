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
#include <vector>

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

// Runs the sweep's pairs of `seed` (all of them, or those of `only`) and returns their figures.
Json RunSweep(unsigned seed, const std::vector<int>& only = {}) {
  char pattern[] = "/tmp/gpuslice-sweep-test-XXXXXX";
  const std::string report = mkdtemp(pattern);
  std::vector<std::string> argv = {BinDir() + "/gpuslice-bench",
                                   "latency-sweep",
                                   "--seed",
                                   std::to_string(seed),
                                   "--pairs",
                                   std::to_string(kPairs),
                                   "--duration",
                                   "2",
                                   "--quiet",
                                   "--report",
                                   report};
  if (!only.empty()) argv.push_back("--only");
  for (const int index : only) argv.push_back(std::to_string(index));
  const ProcessResult r = gpuslice::testing::Run(argv, {}, 600000);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  std::printf("%s\n", r.out.c_str());
  std::ifstream in(report + "/latency-sweep/results-" + std::to_string(seed) + ".json");
  const Json results = in ? Json::parse(in) : Json{{"pairs", Json::array()}};
  std::filesystem::remove_all(report);
  return results["pairs"];
}

bool WithinBounds(const Json& pair) {
  const double unmanaged = pair["p99_ms"]["unmanaged"], gpuslice = pair["p99_ms"]["gpuslice"];
  const double entitled = pair["corunner_time"]["entitled"], kept = pair["corunner_time"]["gpuslice"];
  return gpuslice <= kP99OverUnmanagedAtMost * unmanaged + kP99SlackMs && kept >= kCorunnerTimeAtLeast * entitled;
}

// A pair outside the bounds is measured once more before it fails the test: on a loaded 2-core
// machine one run's p99 can be a host stall (a service alone at 15 ms p99 for one 1.8 ms kernel
// was seen, and 1.9 ms on the next run); a rule that fails the pair fails it twice.
TEST(SchedLatencySweepTest, RandomPairsKeepTheServiceTailNearUnmanagedAndTheCorunnersTime) {
  const unsigned seed = std::random_device{}() % 1'000'000 + 1;
  std::printf("latency-sweep seed %u (rerun: gpuslice-bench latency-sweep --seed %u --pairs %d)\n", seed, seed, kPairs);
  const Json first = RunSweep(seed);
  ASSERT_EQ(first.size(), static_cast<size_t>(kPairs));
  std::vector<int> again;
  for (const Json& pair : first) {
    if (!WithinBounds(pair)) again.push_back(pair["pair"]["index"]);
  }
  if (again.empty()) return;
  const Json second = RunSweep(seed, again);
  ASSERT_EQ(second.size(), again.size());
  for (const Json& pair : second) {
    const double unmanaged = pair["p99_ms"]["unmanaged"], gpuslice = pair["p99_ms"]["gpuslice"];
    EXPECT_LE(gpuslice, kP99OverUnmanagedAtMost * unmanaged + kP99SlackMs) << pair["description"];
    const double entitled = pair["corunner_time"]["entitled"], kept = pair["corunner_time"]["gpuslice"];
    EXPECT_GE(kept, kCorunnerTimeAtLeast * entitled) << pair["description"];
  }
}

}  // namespace
}  // namespace gpuslice::testing
