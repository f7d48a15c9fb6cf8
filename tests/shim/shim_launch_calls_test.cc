// The driver calls gpuslice makes on a tenant's behalf, counted by the simulated driver
// (GPUSLICE_SIM_CALL_COUNTS): none per launch alone, at most one per ten launches while another
// tenant shares the GPU (docs/performance.md). On a real driver each call costs host time (an
// event recorded per launch cost more than the launch itself), so a launch-bound tenant pays
// for every call counted here. Bursts of 16 kernels of 20 us then a synchronisation: the shape
// of a launch-bound inference service. No timing bound: counts only.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/support/shim_fixture.h"

namespace gpuslice::testing {
namespace {

using Json = nlohmann::json;

class ShimLaunchCallsTest : public ShimTest {
 protected:
  // Every process's calls appended to one file; summed per entry point.
  std::map<std::string, uint64_t> Calls(const std::string& file) {
    std::map<std::string, uint64_t> calls;
    std::ifstream in(file);
    std::string line;
    while (std::getline(in, line)) {
      const Json counts = Json::parse(line);
      if (counts["library"] != "cuda") continue;
      for (const auto& [name, n] : counts["calls"].items()) calls[name] += n.get<uint64_t>();
    }
    std::filesystem::remove(file);
    return calls;
  }

  // `tenants` processes of `steps` steps each, managed or not; their calls.
  std::map<std::string, uint64_t> RunBursts(int tenants, int steps, bool managed, int kernels_per_step = 16,
                                            const std::string& kernel_us = "20", bool call_costs = false) {
    const std::string file = state_dir() + "/calls-" + std::to_string(counter_++) + ".jsonl";
    std::vector<std::unique_ptr<Subprocess>> processes;
    for (int i = 0; i < tenants; ++i) {
      std::vector<std::string> argv = {App("workload"),
                                       "steps",
                                       "--kernels-per-step",
                                       std::to_string(kernels_per_step),
                                       "--kernel-us",
                                       "20",
                                       "--steps",
                                       std::to_string(steps)};
      std::vector<std::string> env = {"GPUSLICE_SIM_CALL_COUNTS=" + file, "GPUSLICE_TENANT=t" + std::to_string(i),
                                      "GPUSLICE_COMPUTE_REQUEST=50"};
      if (call_costs) env.push_back("GPUSLICE_SIM_CALL_COSTS=default");
      if (managed) {
        processes.push_back(StartShimmed(argv, env));
      } else {
        env.push_back("LD_LIBRARY_PATH=" + SimLibDir());
        processes.push_back(std::make_unique<Subprocess>(argv, env));
      }
    }
    for (auto& p : processes) {
      const ProcessResult r = p->Wait(120000);
      EXPECT_EQ(r.exit_code, 0) << Describe(r);
    }
    return Calls(file);
  }

  int counter_ = 0;
};

uint64_t Launches(const std::map<std::string, uint64_t>& calls) {
  uint64_t n = 0;
  for (const auto& [name, count] : calls) n += name.rfind("cuLaunch", 0) == 0 ? count : 0;
  return n;
}

uint64_t NonLaunchCalls(const std::map<std::string, uint64_t>& calls) {
  uint64_t n = 0;
  for (const auto& [_, count] : calls) n += count;
  return n - Launches(calls);
}

std::string Describe(const std::map<std::string, uint64_t>& calls) {
  std::string text;
  for (const auto& [name, count] : calls) text += name + "=" + std::to_string(count) + " ";
  return text;
}

// Alone, the shim's own calls are a handful made once (finding the device, its UUID and memory):
// a run ten times as long makes exactly as many.
TEST_F(ShimLaunchCallsTest, AloneTheShimMakesNoDriverCallPerLaunch) {
  const auto bare_short = RunBursts(1, 20, false);
  const auto bare_long = RunBursts(1, 200, false);
  const auto short_run = RunBursts(1, 20, true);
  const auto long_run = RunBursts(1, 200, true);
  ASSERT_EQ(Launches(long_run), (200u + 1) * 16);  // the workload's warm-up step too
  const uint64_t added_short = NonLaunchCalls(short_run) - NonLaunchCalls(bare_short);
  const uint64_t added_long = NonLaunchCalls(long_run) - NonLaunchCalls(bare_long);
  EXPECT_EQ(added_long, added_short) << "short: " << Describe(short_run) << "\nlong: " << Describe(long_run);
  EXPECT_LE(added_short, 20u) << Describe(short_run);
}

// Two tenants share the GPU: the grant changes hands, every launch is tracked, and the shim's
// calls (its monitor's included) stay under one per ten launches.
TEST_F(ShimLaunchCallsTest, SharedTheShimMakesAtMostOneDriverCallPerTenLaunches) {
  constexpr int kSteps = 400;
  const auto bare = RunBursts(2, kSteps, false);
  const auto shared = RunBursts(2, kSteps, true);
  ASSERT_EQ(Launches(shared), 2u * (kSteps + 1) * 16);
  const double added = static_cast<double>(NonLaunchCalls(shared) - NonLaunchCalls(bare)) /
                       static_cast<double>(Launches(shared));
  std::printf("calls added per launch while sharing: %.4f (%s)\n", added, Describe(shared).c_str());
  EXPECT_LE(added, 0.1) << Describe(shared);
  EXPECT_GT(BrokerSnapshot().gpus.at(0).grants, 2u) << "the two tenants did not share the GPU";
}

// Steps of 200 kernels of 10-60 us (7 ms, over the default 2 ms budget), as an LLM decode loop
// queues them: each launcher keeps going over its budget and waits for its own work. Markers
// (an event recorded, then waited for) every three quarters of a budget and no query of work
// that cannot have completed yet keep it under 0.06 calls per launch on a loaded 2-core host, with
// the simulated driver charging real per-call costs; the bound is loose because a loaded host
// stretches the measured kernel length, and with it the number of markers.
TEST_F(ShimLaunchCallsTest, ALauncherOverItsBudgetWaitsForItsWorkWithFewCalls) {
  constexpr int kSteps = 20;
  const auto bare = RunBursts(2, kSteps, false, 200, "10-60", true);
  const auto shared = RunBursts(2, kSteps, true, 200, "10-60", true);
  ASSERT_EQ(Launches(shared), 2u * (kSteps + 1) * 200);
  const double added = static_cast<double>(NonLaunchCalls(shared) - NonLaunchCalls(bare)) /
                       static_cast<double>(Launches(shared));
  std::printf("calls added per launch over the budget: %.4f (%s)\n", added, Describe(shared).c_str());
  EXPECT_LE(added, 0.11) << Describe(shared);
  // Queries of the busy streams and markers: none of work that cannot have completed yet (0.004
  // per launch; asked every 0.1 ms regardless, 0.016-0.021).
  const auto count = [&](const char* name) { return shared.count(name) ? shared.at(name) : 0u; };
  EXPECT_LE(static_cast<double>(count("cuEventQuery") + count("cuStreamQuery")) / static_cast<double>(Launches(shared)),
            0.01)
      << Describe(shared);
  EXPECT_GT(count("cuEventRecord"), 0u) << "no launcher went over its budget";
}

}  // namespace
}  // namespace gpuslice::testing
