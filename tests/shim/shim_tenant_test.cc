// A quota belongs to a tenant, not to a process: every process started with the same
// GPUSLICE_TENANT shares one quota per GPU, whatever container or program it is, while
// different tenants never take from each other, and a process without GPUSLICE_TENANT is a
// tenant of its own. A tenant's quota on a GPU is fixed by its first process; a later process
// asking for another one is refused rather than silently given either.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "broker/snapshot.h"
#include "tests/support/shim_fixture.h"

namespace gpuslice::testing {
namespace {

using ::testing::HasSubstr;

class ShimTenantTest : public ShimTest {
 protected:
  // Asks for four 256 MiB chunks, as `env` says, while something else may hold memory.
  Json AskForFour(const std::vector<std::string>& env) {
    const ProcessResult r = RunShimmed({App("direct"), "alloc", "--chunk", "256Mi", "--count", "4"}, env);
    EXPECT_EQ(r.exit_code, 0) << Describe(r);
    return ResultOf(r);
  }
};

TEST_F(ShimTenantTest, ProcessesOfOneTenantShareOneQuota) {
  const std::vector<std::string> team = {"GPUSLICE_TENANT=team", "GPUSLICE_MEMORY_LIMIT=1Gi"};
  auto first = StartHolder({App("direct"), "alloc", "--chunk", "256Mi", "--count", "3"}, team);
  EXPECT_EQ(EventOf(first->StdoutSoFar(), "holding").value("allocated", -1), 3);
  // A different program on a different path, same tenant: what the first holds is not its own.
  const ProcessResult r = RunShimmed(kProcAddress.Command("alloc", {"--chunk", "256Mi", "--count", "4"}), team);
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_EQ(ResultOf(r).value("allocated", -1), 1) << r.out;
  EXPECT_EQ(ResultOf(r)["refusals"].value("CUDA_ERROR_OUT_OF_MEMORY", 0), 3) << r.out;
  EXPECT_EQ(TenantUsed("team"), 768 * kMi) << "the second process freed its chunk on exit";
  EXPECT_EQ(Stop(*first).exit_code, 0);
  EXPECT_EQ(TenantUsed("team"), 0u);
}

TEST_F(ShimTenantTest, DifferentTenantsHaveSeparateQuotas) {
  auto a = StartHolder({App("direct"), "alloc", "--chunk", "256Mi", "--count", "4"},
                       {"GPUSLICE_TENANT=team-a", "GPUSLICE_MEMORY_LIMIT=1Gi"});
  const Json b = AskForFour({"GPUSLICE_TENANT=team-b", "GPUSLICE_MEMORY_LIMIT=1Gi"});
  EXPECT_EQ(b.value("allocated", -1), 4);
  EXPECT_EQ(b["mem_before"].value("free", uint64_t{0}), kGi) << "team-a's memory is not team-b's concern";
  EXPECT_EQ(TenantUsed("team-a"), kGi);
  EXPECT_EQ(Stop(*a).exit_code, 0);
}

TEST_F(ShimTenantTest, AProcessWithoutATenantIsATenantOfItsOwn) {
  auto a = StartHolder({App("direct"), "alloc", "--chunk", "256Mi", "--count", "4"}, {"GPUSLICE_MEMORY_LIMIT=1Gi"});
  const Json b = AskForFour({"GPUSLICE_MEMORY_LIMIT=1Gi"});
  EXPECT_EQ(b.value("allocated", -1), 4);
  // Two anonymous tenants, one per process, each holding (or having held) its own.
  int anonymous = 0;
  for (const auto& gpu : BrokerSnapshot().gpus)
    for (const auto& tenant : gpu.tenants)
      if (tenant.used == kGi) ++anonymous;
  EXPECT_EQ(anonymous, 1) << "the holder's own tenant holds its 1 GiB";
  EXPECT_EQ(Stop(*a).exit_code, 0);
}

TEST_F(ShimTenantTest, ATenantsQuotaIsFixedByItsFirstProcess) {
  auto first = StartHolder({App("direct"), "alloc", "--chunk", "256Mi", "--count", "1"},
                           {"GPUSLICE_TENANT=team", "GPUSLICE_MEMORY_LIMIT=1Gi"});
  const ProcessResult r = RunShimmed({App("direct"), "alloc", "--chunk", "256Mi", "--count", "4"},
                                     {"GPUSLICE_TENANT=team", "GPUSLICE_MEMORY_LIMIT=2Gi"});
  const Json result = ResultOf(r);
  EXPECT_EQ(result.value("allocated", -1), 0) << r.out;
  EXPECT_EQ(result["refusals"], Json({{"CUDA_ERROR_NOT_PERMITTED", 4}})) << "refused by the shim: " << r.out;
  const std::vector<std::string> lines = GpusliceLines(r.err);
  ASSERT_EQ(lines.size(), 1u) << "one line, not one per refused call:\n" << r.err;
  EXPECT_THAT(lines[0], HasSubstr("team"));
  EXPECT_THAT(lines[0], HasSubstr("1073741824"));
  EXPECT_THAT(lines[0], HasSubstr("2147483648"));
  EXPECT_EQ(TenantUsed("team"), 256 * kMi) << "the refused process took nothing";
  EXPECT_EQ(Stop(*first).exit_code, 0);
}

TEST_F(ShimTenantTest, TheBrokerListsTheTenantsProcessesAndTheirCharges) {
  const std::vector<std::string> team = {"GPUSLICE_TENANT=team", "GPUSLICE_MEMORY_LIMIT=1Gi"};
  auto a = StartHolder({App("direct"), "alloc", "--chunk", "256Mi", "--count", "1"}, team);
  auto b = StartHolder({App("dlsym"), "alloc", "--chunk", "256Mi", "--count", "2"}, team);
  const broker::Snapshot snapshot = BrokerSnapshot();
  ASSERT_EQ(snapshot.gpus.size(), 1u);
  const broker::TenantView* view = nullptr;
  for (const auto& t : snapshot.gpus[0].tenants)
    if (t.name == "team") view = &t;
  ASSERT_NE(view, nullptr);
  EXPECT_EQ(view->quota, kGi);
  EXPECT_EQ(view->used, 768 * kMi);
  std::vector<std::pair<int, uint64_t>> charges;
  for (const auto& p : view->processes) charges.emplace_back(p.pid, p.charged);
  EXPECT_THAT(charges, ::testing::UnorderedElementsAre(std::make_pair(static_cast<int>(a->pid()), 256 * kMi),
                                                       std::make_pair(static_cast<int>(b->pid()), 512 * kMi)));
  EXPECT_EQ(Stop(*a).exit_code, 0);
  EXPECT_EQ(Stop(*b).exit_code, 0);
  EXPECT_EQ(TenantUsed("team"), 0u);
}

}  // namespace
}  // namespace gpuslice::testing
