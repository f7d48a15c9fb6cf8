// gpuslice inside a MIG instance of the simulated GPU: a percentage quota is a share of the
// instance the tenant's CUDA enumerates, not of the whole GPU, and cuMemGetInfo shows the
// tenant's slice of that instance; tenants of different instances do not share a quota's room.
// A whole node split into instances fits: each instance is a GPU of the broker's own.
#include <cuda.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "broker/segment_layout.h"
#include "broker/snapshot.h"
#include "gpuslice/sim_query.h"
#include "tests/support/shim_fixture.h"
#include "tests/support/sim_driver_helpers.h"

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

// The common inference layout: 8 x H100-80GB, each split into seven 1g.10gb instances.
class ShimMigNodeTest : public ShimTest {
 protected:
  void SetUp() override {
    ShimTest::SetUp();
    unsetenv("CUDA_VISIBLE_DEVICES");
    SetEnv("GPUSLICE_SIM_MODEL", "H100-80GB");
    SetEnv("GPUSLICE_SIM_DEVICES", "8");
    SetEnv("GPUSLICE_SIM_MIG", "1g.10gb,1g.10gb,1g.10gb,1g.10gb,1g.10gb,1g.10gb,1g.10gb");
  }
  // The MIG- UUIDs of every instance, once a child's cuInit has created the simulated node.
  std::vector<std::string> InstanceUuids() {
    ForkedChild creator([](int) { return cuInit(0) == CUDA_SUCCESS ? 0 : 1; });
    EXPECT_EQ(creator.Wait(), 0);
    simquery::Snapshot snap;
    std::string error;
    EXPECT_TRUE(simquery::TakeSnapshot(state_path(), &snap, &error)) << error;
    std::vector<std::string> uuids;
    for (const auto& gpu : snap.devices)
      for (const auto& instance : gpu.mig_instances) uuids.push_back(instance.uuid);
    return uuids;
  }
};

// 56 tenants, one per instance and all alive at once, each a separate preloaded process: every
// one is admitted and gets exactly its own quota (a distinct one, so that no two ledgers could be
// confused): its allocations up to the quota succeed and the next one is refused. With a GPU
// table of 16 entries, every tenant past the 16th instance was refused outright.
TEST_F(ShimMigNodeTest, FiftySixTenantsOnEightGpusOfSevenInstancesEachGetTheirQuotas) {
  const std::vector<std::string> uuids = InstanceUuids();
  ASSERT_EQ(uuids.size(), 56u);
  constexpr uint64_t kChunk = 32 * kMi;
  const auto chunks_of = [](size_t i) { return static_cast<int>(i % 7) + 1; };  // 1..7 chunks
  std::vector<std::unique_ptr<Subprocess>> holders;
  for (size_t i = 0; i < uuids.size(); ++i) {
    const int chunks = chunks_of(i);
    holders.push_back(
        StartShimmed({App("direct"), "alloc", "--chunk", "32Mi", "--count", std::to_string(chunks + 1), "--hold", "60"},
                     {"CUDA_VISIBLE_DEVICES=" + uuids[i], "GPUSLICE_TENANT=node-" + std::to_string(i),
                      "GPUSLICE_MEMORY_LIMIT=" + std::to_string(chunks * 32) + "Mi"}));
  }
  for (size_t i = 0; i < holders.size(); ++i) {
    ASSERT_TRUE(holders[i]->WaitForOutput("\"event\":\"holding\"", 30000))
        << "tenant " << i << " did not report:\n"
        << holders[i]->StdoutSoFar() << holders[i]->StderrSoFar();
    const Json held = EventOf(holders[i]->StdoutSoFar(), "holding");
    EXPECT_EQ(held.value("allocated", -1), chunks_of(i)) << "tenant " << i << " on " << uuids[i] << ":\n"
                                                         << holders[i]->StderrSoFar();
    EXPECT_EQ(held.value("refused", -1), 1) << "tenant " << i;
  }

  // The broker's view while all of them hold: one GPU entry per instance, each tenant's ledger
  // with its own quota, full.
  std::map<std::string, broker::TenantView> ledgers;
  const broker::Snapshot snapshot = BrokerSnapshot();
  EXPECT_EQ(snapshot.gpus.size(), 56u);
  for (const auto& gpu : snapshot.gpus)
    for (const auto& tenant : gpu.tenants) ledgers[tenant.name] = tenant;
  for (size_t i = 0; i < uuids.size(); ++i) {
    const auto found = ledgers.find("node-" + std::to_string(i));
    ASSERT_NE(found, ledgers.end()) << "no ledger for tenant " << i;
    EXPECT_EQ(found->second.quota, chunks_of(i) * kChunk) << "tenant " << i;
    EXPECT_EQ(found->second.used, chunks_of(i) * kChunk) << "tenant " << i;
  }
  // The state file stays sparse: 56 tenants on 56 GPUs touch a few MiB of its 16 (docs/broker.md,
  // "Size"), not all of it.
  struct stat file {};
  ASSERT_EQ(stat((state_dir() + "/" + broker::kStateFileName).c_str(), &file), 0);
  EXPECT_EQ(static_cast<uint64_t>(file.st_size), sizeof(broker::Segment));
  std::printf("state file: %.2f MiB of %.2f allocated\n", static_cast<double>(file.st_blocks) * 512 / kMi,
              static_cast<double>(file.st_size) / kMi);
  EXPECT_LT(static_cast<uint64_t>(file.st_blocks) * 512, 4 * kMi) << "blocks allocated to the state file";
  for (auto& holder : holders) EXPECT_EQ(Stop(*holder).exit_code, 0);
}

}  // namespace
}  // namespace gpuslice::testing
