// Configurations that run, but never silently: a variable meant for gpuslice that it does not
// read (GPU_SLICE_MEMORY_LIMIT, gpuslice_memory_limit) and a quota larger than the device each
// give one "gpuslice: warning:" line naming the variable, and the program goes on as documented
// (the near-miss is not read: no limit from it; the oversized quota is kept, the device binds).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/support/shim_fixture.h"

namespace gpuslice::testing {
namespace {

using ::testing::HasSubstr;

class ShimConfigWarningsTest : public ShimTest {
 protected:
  void SetUp() override {
    ShimTest::SetUp();
    SetEnv("GPUSLICE_SIM_MEMORY", "16Gi");
  }
  // Two 1 GiB allocations: within any quota of 2 GiB or more, and within the device.
  ProcessResult RunAlloc(const std::vector<std::string>& env) {
    return RunShimmed(kDirect.Command("alloc", {"--chunk", "1Gi", "--count", "2"}), env);
  }
};

struct NearMiss {
  std::string name;
  std::string meant;
};

std::ostream& operator<<(std::ostream& os, const NearMiss& n) { return os << n.name; }

class ShimNearMissTest : public ShimConfigWarningsTest, public ::testing::WithParamInterface<NearMiss> {};

TEST_P(ShimNearMissTest, IsWarnedAboutInOneLineNamingItAndWhatItMeantAndTheRunGoesOnUnlimited) {
  const NearMiss& n = GetParam();
  // 1Gi in the near-miss: were it read, the second allocation would be refused.
  const ProcessResult r = RunAlloc({"GPUSLICE_TENANT=team", n.name + "=1Gi"});
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_EQ(ResultOf(r).value("allocated", -1), 2) << "the variable is not read: " << r.out;
  const std::vector<std::string> lines = GpusliceLines(r.err);
  ASSERT_EQ(lines.size(), 1u) << r.err;
  EXPECT_THAT(lines[0], HasSubstr("gpuslice: warning: " + n.name + "='1Gi' is not read"));
  EXPECT_THAT(lines[0], HasSubstr("did you mean " + n.meant + "='1Gi'?"));
}

INSTANTIATE_TEST_SUITE_P(Names, ShimNearMissTest,
                         ::testing::Values(NearMiss{"GPU_SLICE_MEMORY_LIMIT", "GPUSLICE_MEMORY_LIMIT"},
                                           NearMiss{"gpuslice_memory_limit", "GPUSLICE_MEMORY_LIMIT"},
                                           NearMiss{"Gpuslice_Memory_Limit", "GPUSLICE_MEMORY_LIMIT"},
                                           NearMiss{"gpu_slice_memory_limit", "GPUSLICE_MEMORY_LIMIT"},
                                           NearMiss{"GPU_SLICE_MEMORY_LIMIT_0", "GPUSLICE_MEMORY_LIMIT_0"},
                                           NearMiss{"gpuslice_memory_limt", "GPUSLICE_MEMORY_LIMIT"}),
                         [](const auto& info) { return info.param.name; });

// Control: the real name is read and binds (the second 1 GiB is refused), without a warning.
TEST_F(ShimConfigWarningsTest, TheRealNameBindsWithoutAWarning) {
  const ProcessResult r = RunAlloc({"GPUSLICE_TENANT=team", "GPUSLICE_MEMORY_LIMIT=1Gi"});
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_EQ(ResultOf(r).value("allocated", -1), 1) << r.out;
  EXPECT_TRUE(GpusliceLines(r.err).empty()) << r.err;
}

TEST_F(ShimConfigWarningsTest, AQuotaLargerThanTheDeviceIsWarnedAboutOnceAndKept) {
  const ProcessResult r = RunAlloc({"GPUSLICE_TENANT=team", "GPUSLICE_MEMORY_LIMIT=100Gi"});
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_EQ(ResultOf(r).value("allocated", -1), 2) << r.out;
  const std::vector<std::string> lines = GpusliceLines(r.err);
  ASSERT_EQ(lines.size(), 1u) << r.err;
  EXPECT_THAT(lines[0], HasSubstr("gpuslice: warning: GPUSLICE_MEMORY_LIMIT (100 GiB) is larger than GPU-"));
  EXPECT_THAT(lines[0], HasSubstr("'s 16 GiB: the quota never binds"));
  EXPECT_THAT(lines[0], HasSubstr("e.g. GPUSLICE_MEMORY_LIMIT=50%"));
  // Kept as given: the broker holds the tenant's quota of 100 GiB.
  const auto gpus = BrokerSnapshot().gpus;
  ASSERT_EQ(gpus.size(), 1u);
  ASSERT_EQ(gpus[0].tenants.size(), 1u);
  EXPECT_EQ(gpus[0].tenants[0].quota, 100 * kGi);
}

TEST_F(ShimConfigWarningsTest, AnOversizedPerDeviceQuotaNamesItsOwnVariable) {
  const ProcessResult r =
      RunAlloc({"GPUSLICE_TENANT=team", "GPUSLICE_MEMORY_LIMIT=4Gi", "GPUSLICE_MEMORY_LIMIT_0=17Gi"});
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  const std::vector<std::string> lines = GpusliceLines(r.err);
  ASSERT_EQ(lines.size(), 1u) << r.err;
  EXPECT_THAT(lines[0], HasSubstr("warning: GPUSLICE_MEMORY_LIMIT_0 (17 GiB) is larger than"));
}

// Controls: the whole device, in bytes or as 100%, is not larger than the device.
TEST_F(ShimConfigWarningsTest, AQuotaOfTheWholeDeviceIsNotWarnedAbout) {
  for (const char* limit : {"GPUSLICE_MEMORY_LIMIT=16Gi", "GPUSLICE_MEMORY_LIMIT=100%"}) {
    const ProcessResult r = RunAlloc({"GPUSLICE_TENANT=team", limit});
    ASSERT_EQ(r.exit_code, 0) << Describe(r);
    EXPECT_TRUE(GpusliceLines(r.err).empty()) << limit << ": " << r.err;
  }
}

}  // namespace
}  // namespace gpuslice::testing
