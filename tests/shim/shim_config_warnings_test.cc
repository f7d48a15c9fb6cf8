// A variable meant for gpuslice but not spelt exactly as one of its options (GPU_SLICE_MEMORY_LIMIT,
// gpuslice_memory_limit) is refused as GPUSLICE_MEMORY_LIMT is: one line naming it and the option
// it likely meant, and the shim fails closed (it once warned and ran unlimited). A quota larger
// than the device runs, never silently: one "gpuslice: warning:" line, the quota kept.
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

TEST_P(ShimNearMissTest, IsRefusedInOneLineNamingItAndWhatItMeantAndTheShimFailsClosed) {
  const NearMiss& n = GetParam();
  const ProcessResult r = RunAlloc({"GPUSLICE_TENANT=team", n.name + "=1Gi"});
  EXPECT_EQ(r.exit_code, 3) << "cuInit must fail: " << Describe(r);
  const Json result = ResultOf(r);
  EXPECT_EQ(result.value("init", ""), "CUDA_ERROR_NOT_PERMITTED") << r.out;
  EXPECT_EQ(result.value("allocated", -1), 0) << "nothing runs unlimited: " << r.out;
  const std::vector<std::string> lines = GpusliceLines(r.err);
  ASSERT_EQ(lines.size(), 1u) << r.err;
  EXPECT_THAT(lines[0], HasSubstr("gpuslice: unknown variable " + n.name + "='1Gi'"));
  EXPECT_THAT(lines[0], HasSubstr("did you mean " + n.meant + "?"));
}

INSTANTIATE_TEST_SUITE_P(Names, ShimNearMissTest,
                         ::testing::Values(NearMiss{"GPU_SLICE_MEMORY_LIMIT", "GPUSLICE_MEMORY_LIMIT"},
                                           NearMiss{"gpuslice_memory_limit", "GPUSLICE_MEMORY_LIMIT"},
                                           NearMiss{"Gpuslice_Memory_Limit", "GPUSLICE_MEMORY_LIMIT"},
                                           NearMiss{"gpu_slice_memory_limit", "GPUSLICE_MEMORY_LIMIT"},
                                           NearMiss{"GPU_SLICE_MEMORY_LIMIT_0", "GPUSLICE_MEMORY_LIMIT_0"},
                                           NearMiss{"gpuslice_memory_limt", "GPUSLICE_MEMORY_LIMIT"},
                                           NearMiss{"GPUSLICE_MEMORY_LIMT", "GPUSLICE_MEMORY_LIMIT"}),
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
