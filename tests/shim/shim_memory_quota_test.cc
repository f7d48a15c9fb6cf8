// Every device-allocation family counts against the tenant's quota: cuMemAlloc, pitched,
// managed, stream-ordered from the default pool and from a pool of the program's own
// (cuMemAllocFromPoolAsync), virtual-memory physical allocations (cuMemCreate) and CUDA arrays
// (2D, 3D, mipmapped; sized by the shared estimate of common/array_bytes.h). Beyond the quota
// the allocating call fails with CUDA_ERROR_OUT_OF_MEMORY and the program carries on; freeing
// one allocation makes room for exactly one more at once, not after some lazy cleanup.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/support/shim_fixture.h"

namespace gpuslice::testing {
namespace {

struct FamilyCase {
  DriverPath path;
  std::string api;
};

class ShimMemoryQuotaFamilyTest : public ShimTest, public ::testing::WithParamInterface<FamilyCase> {};

TEST_P(ShimMemoryQuotaFamilyTest, RefusedBeyondTheQuotaAndAFreeMakesRoomAtOnce) {
  const ProcessResult r =
      RunShimmed(GetParam().path.Command(GetParam().api, {"--chunk", "256Mi", "--count", "6", "--refill"}),
                 {"GPUSLICE_MEMORY_LIMIT=1Gi"});
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  const Json result = ResultOf(r);
  // A 256 MiB chunk is one item of 256 MiB, except a two-level mipmap (base plus a quarter).
  const uint64_t item = result.value("item_bytes", uint64_t{0});
  ASSERT_GT(item, 0u) << r.out;
  const int fits = static_cast<int>(kGi / item);
  EXPECT_EQ(result.value("allocated", -1), fits) << r.out;
  EXPECT_EQ(result.value("refused", -1), 6 - fits) << r.out;
  EXPECT_EQ(result["refusals"].value("CUDA_ERROR_OUT_OF_MEMORY", 0), 6 - fits) << r.out;
  const std::vector<std::string> refill = result["refill"];
  EXPECT_EQ(refill, (std::vector<std::string>{"CUDA_SUCCESS", "CUDA_ERROR_OUT_OF_MEMORY"}))
      << "after one free exactly one allocation fits again: " << r.out;
  // And everything came back when the program freed it.
  EXPECT_EQ(result["mem_after"].value("free", uint64_t{0}), kGi) << r.out;
}

std::vector<FamilyCase> Families() {
  std::vector<FamilyCase> cases;
  for (const char* api : {"alloc", "pitch", "managed", "async", "pool", "vmm", "array", "array3d", "mipmap"}) {
    cases.push_back({kDirect, api});
    cases.push_back({kProcAddress, api});
  }
  cases.push_back({kDirectPtsz, "async"});
  cases.push_back({kDirectPtsz, "pool"});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(EveryFamily, ShimMemoryQuotaFamilyTest, ::testing::ValuesIn(Families()),
                         [](const auto& info) { return info.param.path.name + "_" + info.param.api; });

class ShimMemoryQuotaTest : public ShimTest {};

TEST_F(ShimMemoryQuotaTest, WithoutALimitNothingIsRefused) {
  SetEnv("GPUSLICE_SIM_MEMORY", "4Gi");
  const ProcessResult r = RunShimmed({App("direct"), "alloc", "--chunk", "256Mi", "--count", "12"});
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  const Json result = ResultOf(r);
  EXPECT_EQ(result.value("allocated", -1), 12) << r.out;
  EXPECT_EQ(result["mem_before"].value("total", uint64_t{0}), 4 * kGi) << "no quota: the device as it is";
}

TEST_F(ShimMemoryQuotaTest, TheDriversOwnRefusalPassesThroughUnderTheQuota) {
  // A 4 GiB quota on a 1 GiB device: the device runs out first, and says so itself.
  SetEnv("GPUSLICE_SIM_MEMORY", "1Gi");
  const ProcessResult r = RunShimmed({App("direct"), "alloc", "--chunk", "256Mi", "--count", "6", "--refill"},
                                     {"GPUSLICE_MEMORY_LIMIT=4Gi"});
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  const Json result = ResultOf(r);
  EXPECT_EQ(result.value("allocated", -1), 4) << r.out;
  EXPECT_EQ(result["refusals"].value("CUDA_ERROR_OUT_OF_MEMORY", 0), 2) << r.out;
  // The failed driver calls rolled their reservations back: a free still makes room.
  EXPECT_EQ(result["refill"][0], "CUDA_SUCCESS") << r.out;
}

TEST_F(ShimMemoryQuotaTest, ThreadsOfOneProcessNeverGetMoreThanTheQuota) {
  const ProcessResult r = RunShimmed({App("direct"), "alloc", "--chunk", "64Mi", "--count", "8", "--threads", "8"},
                                     {"GPUSLICE_MEMORY_LIMIT=1Gi"});
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  const Json result = ResultOf(r);
  EXPECT_EQ(result.value("allocated", -1), 16) << r.out;
  EXPECT_EQ(result.value("refused", -1), 64 - 16) << r.out;
  EXPECT_EQ(result["mem_held"].value("free", uint64_t{1}), 0u) << r.out;
}

TEST_F(ShimMemoryQuotaTest, ChargesRoundUpAsTheDriverAligns) {
  // An allocation of 1 MiB + 1 byte takes 1 MiB + 512 bytes of the device (the driver's
  // alignment), so a quota of exactly 100 such charges admits 100 of them and not 101.
  const uint64_t chunk = kMi + 1;
  const uint64_t quota = 100 * (kMi + 512);
  const ProcessResult r = RunShimmed({App("direct"), "alloc", "--chunk", std::to_string(chunk), "--count", "101"},
                                     {"GPUSLICE_MEMORY_LIMIT=" + std::to_string(quota)});
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  const Json result = ResultOf(r);
  EXPECT_EQ(result.value("allocated", -1), 100) << r.out;
  EXPECT_EQ(result.value("refused", -1), 1) << r.out;
  EXPECT_EQ(result["mem_held"].value("free", uint64_t{1}), 0u) << r.out;
}

// Rows of 513 bytes are padded to a pitch of 1024 (the driver's 512-byte alignment), so two of
// them take 2 KiB of the device, not the 1.5 KiB their width rounds to: a quota of exactly 100
// such allocations admits 100 and not 101 (charged by width, 133 would fit). Every other test's
// rows are already a multiple of the alignment, where width and pitch agree.
TEST_F(ShimMemoryQuotaTest, PitchedRowsAreChargedByTheirPaddedPitch) {
  const uint64_t pitch_bytes = 2 * 1024;
  for (const DriverPath& path : {kDirect, kProcAddress}) {
    const ProcessResult r = RunShimmed(path.Command("pitch", {"--pitch-width", "513", "--count", "101"}),
                                       {"GPUSLICE_MEMORY_LIMIT=" + std::to_string(100 * pitch_bytes)});
    ASSERT_EQ(r.exit_code, 0) << Describe(r);
    const Json result = ResultOf(r);
    EXPECT_EQ(result.value("allocated", -1), 100) << path.name << ": " << r.out;
    EXPECT_EQ(result.value("refused", -1), 1) << path.name << ": " << r.out;
    EXPECT_EQ(result["mem_held"].value("free", uint64_t{1}), 0u) << path.name << ": " << r.out;
  }
}

}  // namespace
}  // namespace gpuslice::testing
