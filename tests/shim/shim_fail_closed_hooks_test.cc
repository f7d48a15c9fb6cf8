// Every memory hook fails closed with the shim's own error, CUDA_ERROR_NOT_PERMITTED: when the
// shim refused to start (a misspelt GPUSLICE_* variable) and when it cannot open the tenant's
// ledger (another process of the tenant fixed another quota). Not merely "nothing allocated":
// a refusal with the driver's code (say CUDA_ERROR_NOT_INITIALIZED, because the real driver was
// never initialised) would tell the application something false, and would also be what a
// program that bypassed the shim sees. The control: with a valid setting, every family allocates.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/support/shim_fixture.h"

namespace gpuslice::testing {
namespace {

const std::vector<std::string> kTwoChunks = {"--chunk", "64Mi", "--count", "2"};

class ShimFailClosedHooksTest : public ShimTest, public ::testing::WithParamInterface<std::string> {};

TEST_P(ShimFailClosedHooksTest, AnUnknownVariableMakesEveryAllocationFailWithNotPermitted) {
  const ProcessResult r =
      RunShimmed(kDirect.Command(GetParam(), kTwoChunks), {"GPUSLICE_MEMORY_LIMIT=1Gi", "GPUSLICE_MEMORY_LIMT=1Gi"});
  EXPECT_EQ(r.exit_code, 3) << Describe(r);
  const Json result = ResultOf(r);
  EXPECT_EQ(result.value("init", ""), "CUDA_ERROR_NOT_PERMITTED") << r.out;
  EXPECT_EQ(result.value("allocated", -1), 0) << r.out;
  EXPECT_EQ(result["refusals"], Json({{"CUDA_ERROR_NOT_PERMITTED", 2}})) << r.out;
}

TEST_P(ShimFailClosedHooksTest, AProcessThatCannotOpenItsTenantsLedgerGetsNotPermitted) {
  auto first = StartHolder(kDirect.Command("alloc", {"--chunk", "64Mi", "--count", "1"}),
                           {"GPUSLICE_TENANT=team", "GPUSLICE_MEMORY_LIMIT=1Gi"});
  const ProcessResult r =
      RunShimmed(kDirect.Command(GetParam(), kTwoChunks), {"GPUSLICE_TENANT=team", "GPUSLICE_MEMORY_LIMIT=2Gi"});
  const Json result = ResultOf(r);
  EXPECT_EQ(result.value("allocated", -1), 0) << r.out;
  EXPECT_EQ(result["refusals"], Json({{"CUDA_ERROR_NOT_PERMITTED", 2}})) << r.out;
  EXPECT_EQ(Stop(*first).exit_code, 0);
}

TEST_P(ShimFailClosedHooksTest, WithValidSettingsTheSameProgramAllocates) {
  const ProcessResult r = RunShimmed(kDirect.Command(GetParam(), kTwoChunks), {"GPUSLICE_MEMORY_LIMIT=1Gi"});
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_EQ(ResultOf(r).value("allocated", -1), 2) << r.out;
}

INSTANTIATE_TEST_SUITE_P(EveryFamily, ShimFailClosedHooksTest,
                         ::testing::Values("alloc", "pitch", "managed", "async", "pool", "vmm", "array", "array3d",
                                           "mipmap"));

}  // namespace
}  // namespace gpuslice::testing
