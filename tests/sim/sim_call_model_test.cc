// The simulated driver's call model (sim/call_model.h): what each entry point costs the calling
// thread under GPUSLICE_SIM_CALL_COSTS, and the per-entry-point counts GPUSLICE_SIM_CALL_COUNTS
// writes at exit. Run through gpuslice-workload as a real process (the settings are read once
// per process, at its first driver call).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "sim/call_model.h"
#include "tests/support/subprocess.h"
#include "tests/support/test_env.h"

namespace gpuslice::testing {
namespace {

using Json = nlohmann::json;
using sim::CallCosts;
using sim::CallKind;
using SimCallModelTest = SimTest;

uint32_t CostOf(const CallCosts& costs, CallKind kind) { return costs.by_kind[static_cast<int>(kind)]; }

TEST(SimCallCostsTest, ProfilesAndOverridesParse) {
  CallCosts costs;
  std::string by_name, error;
  ASSERT_TRUE(sim::ParseCallCosts("off", &costs, &by_name, &error)) << error;
  EXPECT_EQ(CostOf(costs, CallKind::kLaunch), 0u);
  ASSERT_TRUE(sim::ParseCallCosts("default", &costs, &by_name, &error)) << error;
  EXPECT_EQ(CostOf(costs, CallKind::kLaunch), 2200u);
  EXPECT_EQ(CostOf(costs, CallKind::kEventRecord), 2000u);
  EXPECT_EQ(CostOf(costs, CallKind::kQuery), 500u);
  EXPECT_EQ(CostOf(costs, CallKind::kContext), 30u);
  ASSERT_TRUE(sim::ParseCallCosts("double,query=700,cuStreamQuery=900", &costs, &by_name, &error)) << error;
  EXPECT_EQ(CostOf(costs, CallKind::kLaunch), 4400u);
  EXPECT_EQ(CostOf(costs, CallKind::kQuery), 700u);
  EXPECT_EQ(by_name, "cuStreamQuery=900");
}

TEST(SimCallCostsTest, BadValuesAreRefusedWithTheReason) {
  CallCosts costs;
  std::string by_name, error;
  EXPECT_FALSE(sim::ParseCallCosts("fast", &costs, &by_name, &error));
  EXPECT_NE(error.find("fast"), std::string::npos);
  EXPECT_FALSE(sim::ParseCallCosts("default,launch", &costs, &by_name, &error));
  EXPECT_FALSE(sim::ParseCallCosts("default,launch=2us", &costs, &by_name, &error));
  EXPECT_FALSE(sim::ParseCallCosts("default,bogus=10", &costs, &by_name, &error));
}

TEST(SimCallCostsTest, EntryPointsAreSortedIntoKinds) {
  EXPECT_EQ(sim::KindOfEntryPoint("cuLaunchKernel_ptsz"), CallKind::kLaunch);
  EXPECT_EQ(sim::KindOfEntryPoint("cuGraphLaunch"), CallKind::kLaunch);
  EXPECT_EQ(sim::KindOfEntryPoint("cuEventRecordWithFlags"), CallKind::kEventRecord);
  EXPECT_EQ(sim::KindOfEntryPoint("cuStreamQuery"), CallKind::kQuery);
  EXPECT_EQ(sim::KindOfEntryPoint("cuCtxSynchronize"), CallKind::kSync);
  EXPECT_EQ(sim::KindOfEntryPoint("cuCtxGetCurrent"), CallKind::kContext);
  EXPECT_EQ(sim::KindOfEntryPoint("cuMemAlloc_v2"), CallKind::kAllocation);
  EXPECT_EQ(sim::KindOfEntryPoint("nvmlDeviceGetMemoryInfo"), CallKind::kNvml);
  EXPECT_EQ(sim::KindOfEntryPoint("cuDeviceGetAttribute"), CallKind::kOther);
}

// gpuslice-workload compute over the simulated driver with `env` added; its result line.
ProcessResult RunCompute(int kernels, std::vector<std::string> env) {
  env.push_back("LD_LIBRARY_PATH=" + SimLibDir());
  return Run({BinDir() + "/gpuslice-workload", "compute", "--kernel-us", "1", "--depth", "2", "--kernels",
              std::to_string(kernels)},
             env);
}

TEST_F(SimCallModelTest, EveryCallOfTheProcessIsCountedOnceAtExit) {
  const std::string path = "/tmp/gpuslice-call-counts-" + std::to_string(getpid()) + "-%p.jsonl";
  const ProcessResult r = RunCompute(300, {"GPUSLICE_SIM_CALL_COUNTS=" + path});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  int lines = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/tmp")) {
    const std::string name = entry.path().string();
    if (name.rfind(path.substr(0, path.find("%p")), 0) != 0) continue;
    std::ifstream in(name);
    std::string line;
    while (std::getline(in, line)) {
      const Json counts = Json::parse(line);
      EXPECT_EQ(counts["library"], "cuda");
      const Json& calls = counts["calls"];
      // The workload records an event behind every kernel and waits for the one two back.
      EXPECT_EQ(calls["cuLaunchKernel"], 300);
      EXPECT_EQ(calls["cuEventRecord"], 300);
      EXPECT_EQ(calls["cuEventSynchronize"], 298);
      EXPECT_EQ(calls["cuInit"], 1);
      ++lines;
    }
    std::filesystem::remove(name);
  }
  EXPECT_EQ(lines, 1);
}

// Each launch costs the launching thread its profile's time: 1000 kernels of 1 µs with a launch
// cost of 100 µs take at least 100 ms; without costs, a fraction of that.
TEST_F(SimCallModelTest, ACostProfileSlowsTheCallingThreadByTheCostOfEachCall) {
  const auto elapsed = [](const ProcessResult& r) {
    const std::string out = r.out;
    const size_t last = out.rfind("{\"event\":\"result\"");
    return Json::parse(out.substr(last))["elapsed_s"].get<double>();
  };
  const ProcessResult free_calls = RunCompute(1000, {});
  ASSERT_EQ(free_calls.exit_code, 0) << free_calls.err;
  const ProcessResult costly = RunCompute(1000, {"GPUSLICE_SIM_CALL_COSTS=off,launch=100000"});
  ASSERT_EQ(costly.exit_code, 0) << costly.err;
  EXPECT_GE(elapsed(costly), 0.100);
  EXPECT_LT(elapsed(free_calls), 0.100);
}

TEST_F(SimCallModelTest, AnInvalidProfileFailsCuInitWithOneLineNamingTheVariable) {
  const ProcessResult r = RunCompute(10, {"GPUSLICE_SIM_CALL_COSTS=fastest"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("GPUSLICE_SIM_CALL_COSTS='fastest'"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("valid: off, default or double"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace gpuslice::testing
