// Golden layout of the broker's state file. If this fails, the layout changed: bump
// kLayoutVersion in broker/segment_layout.h (old files are then refused, never misread), update
// the figures here and the table in docs/broker.md.
#include <gtest/gtest.h>

#include <cstddef>

#include "broker/segment_layout.h"

namespace gpuslice::broker {
namespace {

TEST(BrokerLayoutTest, VersionNineLayoutIsUnchanged) {
  ASSERT_EQ(kLayoutVersion, 12u) << "update the golden figures below for the new version";
  EXPECT_EQ(kMagic, 0x31524B4253435047ULL);
  EXPECT_EQ(kMaxGpus, 128);
  EXPECT_EQ(kMaxTenants, 256);
  EXPECT_EQ(kMaxProcesses, 1024);
  EXPECT_EQ(kTenantNameBytes, 64);
  EXPECT_EQ(kMaxLedgers, 32768);
  EXPECT_EQ(kGpuMaskWords, 2);
  EXPECT_EQ(kLivenessLockBase, 1ULL << 32);

  EXPECT_EQ(sizeof(MutexSlot), 48u);
  EXPECT_EQ(sizeof(SegmentHeader), 128u);
  EXPECT_EQ(sizeof(GpuEntry), 320u);
  EXPECT_EQ(sizeof(TenantEntry), 72u);
  EXPECT_EQ(sizeof(LedgerEntry), 384u);
  EXPECT_EQ(sizeof(ProcessGpuState), 56u);
  EXPECT_EQ(sizeof(ProcessEntry), 8256u);
  EXPECT_EQ(sizeof(Segment), 21096576u);
  EXPECT_EQ(alignof(Segment), 64u);

  EXPECT_EQ(offsetof(SegmentHeader, magic), 0u);
  EXPECT_EQ(offsetof(SegmentHeader, layout_version), 8u);
  EXPECT_EQ(offsetof(SegmentHeader, header_size), 12u);
  EXPECT_EQ(offsetof(SegmentHeader, segment_size), 16u);
  EXPECT_EQ(offsetof(SegmentHeader, created_ns), 24u);
  EXPECT_EQ(offsetof(SegmentHeader, max_gpus), 32u);
  EXPECT_EQ(offsetof(SegmentHeader, max_tenants), 36u);
  EXPECT_EQ(offsetof(SegmentHeader, max_processes), 40u);
  EXPECT_EQ(offsetof(SegmentHeader, tenant_name_bytes), 44u);
  EXPECT_EQ(offsetof(SegmentHeader, gpu_high_water), 48u);
  EXPECT_EQ(offsetof(SegmentHeader, tenant_high_water), 52u);
  EXPECT_EQ(offsetof(SegmentHeader, process_high_water), 56u);
  EXPECT_EQ(offsetof(SegmentHeader, table_mutex), 64u);
  EXPECT_EQ(offsetof(SegmentHeader, ledger_repairs), 112u);
  EXPECT_EQ(offsetof(SegmentHeader, processes_reaped), 120u);

  EXPECT_EQ(offsetof(GpuEntry, state), 0u);
  EXPECT_EQ(offsetof(GpuEntry, total_memory), 8u);
  EXPECT_EQ(offsetof(GpuEntry, uuid), 16u);
  EXPECT_EQ(offsetof(GpuEntry, mode), 32u);
  EXPECT_EQ(offsetof(GpuEntry, priority), 36u);
  EXPECT_EQ(offsetof(GpuEntry, holder), 48u);
  EXPECT_EQ(offsetof(GpuEntry, budget_ns), 96u);
  EXPECT_EQ(offsetof(GpuEntry, holder_active_ns), 104u);
  EXPECT_EQ(offsetof(GpuEntry, last_decision_ns), 112u);
  EXPECT_EQ(offsetof(GpuEntry, tail_holder), 4u);
  EXPECT_EQ(offsetof(GpuEntry, tail_since_ns), 120u);
  EXPECT_EQ(offsetof(GpuEntry, overlap_ns), 128u);
  EXPECT_EQ(offsetof(GpuEntry, holder_busy_at_grant_ns), 136u);
  EXPECT_EQ(offsetof(GpuEntry, first_work_ns), 144u);
  EXPECT_EQ(offsetof(GpuEntry, closed_at_ns), 152u);
  EXPECT_EQ(offsetof(GpuEntry, grant_start_idle_ns), 160u);
  EXPECT_EQ(offsetof(GpuEntry, holder_idle_ns), 168u);
  EXPECT_EQ(offsetof(GpuEntry, drain_ns), 176u);
  EXPECT_EQ(offsetof(GpuEntry, unheld_waiting_ns), 184u);
  EXPECT_EQ(offsetof(GpuEntry, sched_mutex), 192u);
  EXPECT_EQ(offsetof(GpuEntry, memory_mutex), 240u);
  EXPECT_EQ(offsetof(GpuEntry, request_ledgers), 288u);
  EXPECT_EQ(offsetof(GpuEntry, holder_reported_ns), 296u);
  EXPECT_EQ(offsetof(GpuEntry, queue_drain_at_ns), 304u);
  EXPECT_EQ(offsetof(GpuEntry, tail_busy_at_since_ns), 312u);

  EXPECT_EQ(offsetof(TenantEntry, state), 0u);
  EXPECT_EQ(offsetof(TenantEntry, name_length), 4u);
  EXPECT_EQ(offsetof(TenantEntry, name), 8u);

  EXPECT_EQ(offsetof(LedgerEntry, used), 0u);
  EXPECT_EQ(offsetof(LedgerEntry, quota), 8u);
  EXPECT_EQ(offsetof(LedgerEntry, mutex), 16u);
  EXPECT_EQ(offsetof(LedgerEntry, state), 64u);
  EXPECT_EQ(offsetof(LedgerEntry, compute_class), 68u);
  EXPECT_EQ(offsetof(LedgerEntry, request_pct), 72u);
  EXPECT_EQ(offsetof(LedgerEntry, vtime), 88u);
  EXPECT_EQ(offsetof(LedgerEntry, last_share_ppm), 128u);
  EXPECT_EQ(offsetof(LedgerEntry, priority_tokens_ns), 136u);
  EXPECT_EQ(offsetof(LedgerEntry, refused_allocations), 152u);
  EXPECT_EQ(offsetof(LedgerEntry, wait_buckets), 192u);
  EXPECT_EQ(offsetof(LedgerEntry, request), 336u);
  EXPECT_EQ(offsetof(LedgerEntry, announced), 344u);

  EXPECT_EQ(offsetof(ProcessEntry, state), 0u);
  EXPECT_EQ(offsetof(ProcessEntry, pid), 4u);
  EXPECT_EQ(offsetof(ProcessEntry, tenant), 8u);
  EXPECT_EQ(offsetof(ProcessEntry, reserved), 12u);
  EXPECT_EQ(offsetof(ProcessEntry, generation), 16u);
  EXPECT_EQ(offsetof(ProcessEntry, started_ns), 24u);
  EXPECT_EQ(offsetof(ProcessEntry, open_gpus), 32u);
  EXPECT_EQ(offsetof(ProcessEntry, charged), 48u);
  EXPECT_EQ(offsetof(ProcessEntry, sched), 1072u);

  EXPECT_EQ(offsetof(Segment, header), 0u);
  EXPECT_EQ(offsetof(Segment, gpus), 128u);
  EXPECT_EQ(offsetof(Segment, tenants), 41088u);
  EXPECT_EQ(offsetof(Segment, processes), 59520u);
  EXPECT_EQ(offsetof(Segment, ledgers), 8513664u);
}

// The ledger's hot fields and its mutex share one cache line; processes never share one.
TEST(BrokerLayoutTest, HotFieldsAreCacheLineAligned) {
  EXPECT_EQ(offsetof(Segment, ledgers) % 64, 0u);
  EXPECT_EQ(offsetof(Segment, processes) % 64, 0u);
  EXPECT_LE(offsetof(LedgerEntry, mutex) + sizeof(MutexSlot), 64u);
}

}  // namespace
}  // namespace gpuslice::broker
