// Golden layout of the simulator's shared state file. If this fails, the layout changed:
// bump kSimLayoutVersion in sim/sim_state_layout.h, then update the numbers here.
#include <gtest/gtest.h>

#include <cstddef>

#include "sim/sim_state_layout.h"

namespace gpuslice::sim {
namespace {

TEST(SimStateLayoutTest, VersionThreeLayoutIsUnchanged) {
  ASSERT_EQ(kSimLayoutVersion, 3u) << "update the golden figures below for the new version";
  EXPECT_EQ(kMaxDevices, 8);
  EXPECT_EQ(kMaxProcesses, 256);
  EXPECT_EQ(sizeof(SimDeviceConfig), 152u);
  EXPECT_EQ(sizeof(SimProcessDeviceStats), 32u);
  EXPECT_EQ(sizeof(SimArbiter), 288u);
  EXPECT_EQ(sizeof(SimDevice), 8648u);
  EXPECT_EQ(offsetof(SimDevice, lost), 8640u);
  EXPECT_EQ(sizeof(SimProcessSlot), 64u);
  EXPECT_EQ(sizeof(SimSegment), 745888u);
  EXPECT_EQ(offsetof(SimSegment, table_mutex), 32u);
  EXPECT_EQ(offsetof(SimSegment, slots), 72u);
  EXPECT_EQ(offsetof(SimSegment, devices), 16456u);
  EXPECT_EQ(offsetof(SimDevice, arbiter), 152u);
  EXPECT_EQ(offsetof(SimDevice, busy_ns), 440u);
  EXPECT_EQ(offsetof(SimDevice, processes), 448u);
  EXPECT_EQ(offsetof(SimDeviceConfig, total_memory), 112u);
  EXPECT_EQ(offsetof(SimDeviceConfig, timeslice_ns), 120u);
  EXPECT_EQ(offsetof(SimArbiter, owner_since_ns), 16u);
  EXPECT_EQ(offsetof(SimArbiter, wants), 32u);
  EXPECT_EQ(offsetof(SimProcessSlot, generation), 24u);
  EXPECT_EQ(offsetof(SimProcessSlot, command), 32u);
  // Issue 10's block: MIG instances and MPS servers after everything else.
  EXPECT_EQ(kMaxMigInstances, 56);
  EXPECT_EQ(kMaxUnits, 64);
  EXPECT_EQ(sizeof(SimMigInstance), 40u);
  EXPECT_EQ(offsetof(SimMigInstance, profile), 24u);
  EXPECT_EQ(sizeof(SimMig), 486536u);
  EXPECT_EQ(offsetof(SimMig, instances), 8u);
  EXPECT_EQ(offsetof(SimMig, units), 2248u);
  EXPECT_EQ(offsetof(SimSegment, mig), 85640u);
  EXPECT_EQ(sizeof(SimMpsDevice), 1040u);
  EXPECT_EQ(offsetof(SimMpsDevice, sms_held), 16u);
  EXPECT_EQ(sizeof(SimMps), 8328u);
  EXPECT_EQ(offsetof(SimMps, devices), 8u);
  EXPECT_EQ(offsetof(SimSegment, mps), 572176u);
  // Memory partitioning (driver r615): per-cgroup limits and each process's cgroup.
  EXPECT_EQ(kMaxCgroupLimits, 64);
  EXPECT_EQ(kCgroupPathBytes, 512);
  EXPECT_EQ(sizeof(SimCgroupLimit), 536u);
  EXPECT_EQ(offsetof(SimCgroupLimit, path), 24u);
  EXPECT_EQ(sizeof(SimPartitioning), 165384u);
  EXPECT_EQ(offsetof(SimPartitioning, limits), 8u);
  EXPECT_EQ(offsetof(SimPartitioning, process_cgroup), 34312u);
  EXPECT_EQ(offsetof(SimSegment, partitioning), 580504u);
}

}  // namespace
}  // namespace gpuslice::sim
