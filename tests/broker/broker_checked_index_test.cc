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

// open_gpus spans words: GPU 64 and GPU 127 (the last) have bits of their own, apart from GPU 0's
// and GPU 63's, as a single 32-bit mask's `1u << gpu` could not give them.
TEST(BrokerCheckedIndexTest, EveryGpuHasItsOwnOpenBit) {
  auto segment = std::make_unique<Segment>();
  ProcessEntry& process = segment->processes[0];
  const GpuIndex opened[] = {*GpuIndex::From(0), *GpuIndex::From(63), *GpuIndex::From(64),
                             *GpuIndex::From(kMaxGpus - 1)};
  for (GpuIndex gpu : opened) EXPECT_FALSE(MarkGpuOpen(process, gpu)) << "was closed";
  EXPECT_TRUE(MarkGpuOpen(process, opened[2])) << "was open already";
  EXPECT_EQ(process.open_gpus[0].load(), (1ULL << 63) | 1ULL);
  EXPECT_EQ(process.open_gpus[1].load(), (1ULL << 63) | 1ULL);
  int open = 0;
  for (GpuIndex gpu : AllIndices<GpuIndex>()) open += IsGpuOpen(process, gpu);
  EXPECT_EQ(open, 4);
  MarkGpuClosed(process, opened[2]);
  EXPECT_FALSE(IsGpuOpen(process, opened[2]));
  EXPECT_TRUE(IsGpuOpen(process, opened[3]));
  EXPECT_TRUE(IsGpuOpen(process, opened[0]));
  ClearOpenGpus(process);
  for (GpuIndex gpu : AllIndices<GpuIndex>()) EXPECT_FALSE(IsGpuOpen(process, gpu));
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
