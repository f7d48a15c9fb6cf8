// The simulator's GPUSLICE_SIM_* variables: defaults, accepted values, and one clear line for
// each bad value naming the variable, the value and a valid example.
#include "sim/sim_config.h"

#include <gtest/gtest.h>

#include <string>

#include "tests/support/test_env.h"

namespace gpuslice::sim {
namespace {

using SimConfigTest = testing::SimTest;

TEST_F(SimConfigTest, DefaultsDescribeOneH100) {
  SimConfig config;
  std::string error;
  ASSERT_TRUE(LoadSimConfigFromEnv(&config, &error)) << error;
  EXPECT_EQ(config.device_count, 1);
  EXPECT_EQ(config.devices[0].total_memory, 80ULL << 30);
  EXPECT_EQ(config.devices[0].sm_count, 132);
  EXPECT_EQ(config.devices[0].timeslice_ns, 2'000'000u);
  EXPECT_EQ(config.default_kernel_ns, 0u);
  EXPECT_EQ(FormatGpuUuid(config.devices[0].uuid).size(), 40u);
}

TEST_F(SimConfigTest, UuidsAreStablePerSeedAndDistinctPerDevice) {
  SimConfig a, b, c;
  std::string error;
  ASSERT_TRUE(LoadSimConfigFromEnv(&a, &error));
  ASSERT_TRUE(LoadSimConfigFromEnv(&b, &error));
  SetEnv("GPUSLICE_SIM_UUID_SEED", "node-7");
  ASSERT_TRUE(LoadSimConfigFromEnv(&c, &error));
  EXPECT_EQ(FormatGpuUuid(a.devices[0].uuid), FormatGpuUuid(b.devices[0].uuid));
  EXPECT_NE(FormatGpuUuid(a.devices[0].uuid), FormatGpuUuid(a.devices[1].uuid));
  EXPECT_NE(FormatGpuUuid(a.devices[0].uuid), FormatGpuUuid(c.devices[0].uuid));
}

struct BadValue {
  const char* variable;
  const char* value;
};

class SimConfigBadValueTest : public SimConfigTest, public ::testing::WithParamInterface<BadValue> {};

TEST_P(SimConfigBadValueTest, IsRejectedWithOneLineNamingVariableValueAndExample) {
  SetEnv(GetParam().variable, GetParam().value);
  SimConfig config;
  std::string error;
  EXPECT_FALSE(LoadSimConfigFromEnv(&config, &error));
  EXPECT_NE(error.find(GetParam().variable), std::string::npos) << error;
  EXPECT_NE(error.find(std::string("'") + GetParam().value + "'"), std::string::npos) << error;
  EXPECT_NE(error.find("e.g."), std::string::npos) << error;
  EXPECT_EQ(error.find('\n'), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(
    EveryVariable, SimConfigBadValueTest,
    ::testing::Values(BadValue{"GPUSLICE_SIM_DEVICES", "0"}, BadValue{"GPUSLICE_SIM_DEVICES", "9"},
                      BadValue{"GPUSLICE_SIM_DEVICES", "two"}, BadValue{"GPUSLICE_SIM_MEMORY", "lots"},
                      BadValue{"GPUSLICE_SIM_MEMORY", "100"}, BadValue{"GPUSLICE_SIM_SM_COUNT", "0"},
                      BadValue{"GPUSLICE_SIM_COMPUTE_CAPABILITY", "9"},
                      BadValue{"GPUSLICE_SIM_COMPUTE_CAPABILITY", "9.x"}, BadValue{"GPUSLICE_SIM_TIMESLICE_US", "5"},
                      BadValue{"GPUSLICE_SIM_CONTEXT_MEMORY", "-1"}, BadValue{"GPUSLICE_SIM_KERNEL_NS", "1e6"}),
    [](const ::testing::TestParamInfo<BadValue>& info) {
      std::string name = std::string(info.param.variable).substr(13) + "_" + std::to_string(info.index);
      return name;
    });

}  // namespace
}  // namespace gpuslice::sim
