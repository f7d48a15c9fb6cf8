// The typed indices of broker/checked_index.h: made only through a bounds check, and ranges
// over high-water marks clamped to the table, so a forged value read from the segment can never
// index past a table.
#include <gtest/gtest.h>

#include <climits>
#include <memory>

#include "broker/checked_index.h"

namespace gpuslice::broker {
namespace {

TEST(BrokerCheckedIndexTest, OnlyValuesInsideTheTableMakeAnIndex) {
  EXPECT_FALSE(TenantIndex::From(-1));
  EXPECT_FALSE(TenantIndex::From(kMaxTenants));
  EXPECT_FALSE(TenantIndex::From(INT64_MIN));
  EXPECT_FALSE(TenantIndex::FromUnsigned(UINT32_MAX));
  EXPECT_EQ(TenantIndex::From(kMaxTenants - 1)->value(), kMaxTenants - 1);
  EXPECT_FALSE(GpuIndex::From(kMaxGpus));
  EXPECT_EQ(GpuIndex::From(3)->bit(), 8u);
  EXPECT_FALSE(ProcessSlot::From(kMaxProcesses));
  EXPECT_FALSE(LedgerId::From(kMaxLedgers));
  EXPECT_FALSE(LedgerId::From(-5));
}

TEST(BrokerCheckedIndexTest, LedgerIdSplitsIntoItsTenantAndGpu) {
  const LedgerId id = LedgerId::Of(*TenantIndex::From(7), *GpuIndex::From(5));
  EXPECT_EQ(id.value(), 7 * kMaxGpus + 5);
  EXPECT_EQ(id.tenant().value(), 7);
  EXPECT_EQ(id.gpu().value(), 5);
  EXPECT_EQ(LedgerId::From(kMaxLedgers - 1)->tenant().value(), kMaxTenants - 1);
}

TEST(BrokerCheckedIndexTest, ForgedHighWaterMarksAreClampedToTheTable) {
  auto segment = std::make_unique<Segment>();
  segment->header.process_high_water.store(UINT32_MAX);
  segment->header.gpu_high_water.store(kMaxGpus + 1);
  segment->header.tenant_high_water.store(3);
  EXPECT_EQ(UsedProcessSlots(*segment).size(), kMaxProcesses);
  EXPECT_EQ(UsedGpus(*segment).size(), kMaxGpus);
  EXPECT_EQ(UsedTenants(*segment).size(), 3);
  int visited = 0;
  for (ProcessSlot slot : UsedProcessSlots(*segment)) {
    EXPECT_EQ(slot.value(), visited);
    ++visited;
  }
  EXPECT_EQ(visited, kMaxProcesses);
}

TEST(BrokerCheckedIndexTest, ForgedCrossReferencesAreRejected) {
  auto segment = std::make_unique<Segment>();
  ProcessEntry& process = segment->processes[0];
  process.tenant.store(-1);
  EXPECT_FALSE(TenantOf(process));
  process.tenant.store(kMaxTenants);
  EXPECT_FALSE(TenantOf(process));
  process.tenant.store(4);
  EXPECT_EQ(TenantOf(process)->value(), 4);
  GpuEntry& gpu = segment->gpus[0];
  gpu.holder.store(0);
  EXPECT_FALSE(HolderOf(gpu)) << "0 = nobody holds the GPU";
  gpu.holder.store(kMaxTenants + 1);
  EXPECT_FALSE(HolderOf(gpu));
  gpu.holder.store(UINT32_MAX);
  EXPECT_FALSE(HolderOf(gpu));
  gpu.holder.store(kMaxTenants);
  EXPECT_EQ(HolderOf(gpu)->value(), kMaxTenants - 1);
  TenantEntry& tenant = segment->tenants[0];
  tenant.name_length = UINT32_MAX;
  EXPECT_EQ(NameLength(tenant), static_cast<uint32_t>(kTenantNameBytes - 1));
}

}  // namespace
}  // namespace gpuslice::broker
