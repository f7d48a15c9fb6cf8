// gpuslice inside a MIG instance of the simulated GPU: a percentage quota is a share of the
// instance the tenant's CUDA enumerates, not of the whole GPU, and cuMemGetInfo shows the
// tenant's slice of that instance; tenants of different instances do not share a quota's room.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gpuslice/sim_query.h"
#include "tests/support/shim_fixture.h"

namespace gpuslice::testing {
namespace {

constexpr uint64_t kGi = 1ULL << 30;
constexpr uint64_t kH200Memory = 143771ULL << 20;
constexpr uint64_t kInstance = kH200Memory / 2;  // a 3g.71gb: 4 of 8 memory slices

class ShimMigTest : public ShimTest {
 protected:
  void SetUp() override {
    ShimTest::SetUp();
    SetEnv("GPUSLICE_SIM_MODEL", "H200");
    SetEnv("GPUSLICE_SIM_MIG", "3g.71gb,3g.71gb");
  }
};

TEST_F(ShimMigTest, APercentageQuotaIsAShareOfTheInstance) {
  // CUDA_VISIBLE_DEVICES unset: the first instance, as CUDA enumerates it.
  const ProcessResult first =
      RunShimmed({App("direct"), "alloc", "--chunk", "1Gi", "--count", "40"}, {"GPUSLICE_MEMORY_LIMIT=25%"});
  ASSERT_EQ(first.exit_code, 0) << Describe(first);
  const Json a = ResultOf(first);
  EXPECT_EQ(a["mem_before"].value("total", uint64_t{0}), kInstance / 4) << first.out;
  EXPECT_EQ(a.value("allocated", -1), static_cast<int>(kInstance / 4 / kGi)) << first.out;

  simquery::Snapshot snap;
  std::string error;
  ASSERT_TRUE(simquery::TakeSnapshot(state_path(), &snap, &error)) << error;
  ASSERT_EQ(snap.devices[0].mig_instances.size(), 2u);
  const ProcessResult second =
      RunShimmed({App("direct"), "alloc", "--chunk", "1Gi", "--count", "40"},
                 {"GPUSLICE_MEMORY_LIMIT=50%", "CUDA_VISIBLE_DEVICES=" + snap.devices[0].mig_instances[1].uuid});
  ASSERT_EQ(second.exit_code, 0) << Describe(second);
  const Json b = ResultOf(second);
  EXPECT_EQ(b["mem_before"].value("total", uint64_t{0}), kInstance / 2) << second.out;
  EXPECT_EQ(b.value("allocated", -1), static_cast<int>(kInstance / 2 / kGi)) << second.out;
}

}  // namespace
}  // namespace gpuslice::testing
