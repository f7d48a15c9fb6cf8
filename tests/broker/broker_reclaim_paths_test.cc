// Every path by which the broker takes back what a dead process held, one test each. A process
// that dies without unregistering (SIGKILL) leaves its slot registered and its charges on its
// tenant's ledger; they are returned (tables.cc ReapDeadLocked) on the way of whoever next needs
// them:
//
//   on allocation      Broker::Reserve, when the charge does not fit
//                      -> BrokerCrashTest.DeadProcessChargeIsReturnedWithinOneSecond
//   on a new quota     Broker::OpenLedger, when the tenant's ledger has another quota
//                      -> BrokerCrashTest.QuotaOfADeadProcessDoesNotBlockANewQuota
//   on attach          Broker::Register, when the tenant table is full   -> below
//                      Broker::Register, when the process table is full  -> below
//   on a new GPU       Broker::OpenLedger, when the GPU table is full    -> below
//   by gpuslicectl     TakeSnapshot (status) with write access
//                      -> GpuslicectlTest.StatusAfterTheHolderIsKilledShowsItsMemoryReturned
//   on memory queries  the shim's cuMemGetInfo / nvmlDeviceGetMemoryInfo -> shim_reclaim_paths_test
//
// Each scenario is built so that only its own path can run before the assertion (nothing here
// takes a snapshot, allocates or opens a ledger with another quota first): with that path
// disabled the test fails, whatever the other paths do (scripts/mutation-check.sh checks it).
#include <signal.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <string>

#include "broker/broker.h"
#include "broker/segment_file.h"
#include "broker/segment_layout.h"
#include "tests/support/broker_test_names.h"

namespace gpuslice::broker {
namespace {

// The n-th of several distinct GPU UUIDs.
void UuidNumber(int n, uint8_t (&uuid)[16]) {
  std::copy(std::begin(kTestUuid), std::end(kTestUuid), uuid);
  uuid[15] = static_cast<uint8_t>(n);
}

class BrokerReclaimPathsTest : public ::testing::Test {
 protected:
  // A process of `tenant` that opens a ledger on each of `gpus` UUIDs (quota 1 GiB), reserves
  // `bytes` on the first and is SIGKILLed: it stays registered, holding its charge.
  void DieHolding(const std::string& tenant, int gpus, uint64_t bytes) {
    const pid_t pid = children_.Fork([&] {
      std::string error;
      Result<std::unique_ptr<Broker>> attached = Broker::Attach(dir_.state_dir());
      if (!attached.ok()) return 1;
      std::unique_ptr<Broker> broker = std::move(attached).value();
      if (!broker->Register(tenant).ok()) return 1;
      for (int g = 0; g < gpus; ++g) {
        uint8_t uuid[16];
        UuidNumber(g, uuid);
        const Result<LedgerId> ledger = broker->OpenLedger(uuid, kTestGpuTotal, 1024 * kMiB);
        if (!ledger.ok() || (g == 0 && bytes > 0 && !broker->Reserve(*ledger, bytes))) return 1;
      }
      raise(SIGKILL);
      return 1;
    });
    ASSERT_EQ(children_.Wait(pid), 128 + SIGKILL) << "the dying member of " << tenant << " failed before dying";
  }

  // Read straight from the file: no reap on the way (a snapshot would reap).
  uint64_t UsedOnAllLedgers() {
    auto opened = OpenSegmentFile(dir_.state_dir(), OpenMode::kAttachExisting);
    EXPECT_TRUE(opened.ok()) << opened.message();
    const std::unique_ptr<SegmentFile> file = opened.ok() ? std::move(opened).value() : nullptr;
    uint64_t total = 0;
    if (file)
      for (const LedgerEntry& ledger : file->segment->ledgers) total += ledger.used.load();
    return total;
  }
  uint64_t Reaped() {
    auto opened = OpenSegmentFile(dir_.state_dir(), OpenMode::kAttachExisting);
    EXPECT_TRUE(opened.ok()) << opened.message();
    const std::unique_ptr<SegmentFile> file = opened.ok() ? std::move(opened).value() : nullptr;
    return file ? file->segment->header.processes_reaped.load() : 0;
  }

  BrokerTempDir dir_;
  ChildGroup children_;
};

TEST_F(BrokerReclaimPathsTest, ATenantTableFullOfDeadProcessesIsReclaimedWhenANewTenantRegisters) {
  DieHolding("tenant-0", 1, 64 * kMiB);
  for (int t = 1; t < kMaxTenants; ++t) DieHolding("tenant-" + std::to_string(t), 0, 0);
  ASSERT_EQ(UsedOnAllLedgers(), 64 * kMiB);
  ASSERT_EQ(Reaped(), 0u) << "nothing may have been reaped yet";

  std::string error;
  auto newcomer = ValueOf(Broker::Attach(dir_.state_dir()));
  ASSERT_TRUE(newcomer);
  EXPECT_TRUE(IsOk(newcomer->Register("newcomer")));
  EXPECT_EQ(Reaped(), static_cast<uint64_t>(kMaxTenants));
  EXPECT_EQ(UsedOnAllLedgers(), 0u) << "the dead tenant's charge was not returned";
}

TEST_F(BrokerReclaimPathsTest, AProcessTableFullOfDeadProcessesIsReclaimedWhenAProcessRegisters) {
  DieHolding("alpha", 1, 64 * kMiB);
  for (int p = 1; p < kMaxProcesses; ++p) DieHolding("alpha", 0, 0);
  ASSERT_EQ(UsedOnAllLedgers(), 64 * kMiB);
  ASSERT_EQ(Reaped(), 0u) << "nothing may have been reaped yet";

  std::string error;
  auto newcomer = ValueOf(Broker::Attach(dir_.state_dir()));
  ASSERT_TRUE(newcomer);
  EXPECT_TRUE(IsOk(newcomer->Register("alpha")));
  EXPECT_EQ(Reaped(), static_cast<uint64_t>(kMaxProcesses));
  EXPECT_EQ(UsedOnAllLedgers(), 0u) << "the dead process's charge was not returned";
}

TEST_F(BrokerReclaimPathsTest, AGpuTableFullOfADeadProcessesGpusIsReclaimedWhenANewGpuIsOpened) {
  DieHolding("alpha", kMaxGpus, 64 * kMiB);
  ASSERT_EQ(UsedOnAllLedgers(), 64 * kMiB);

  std::string error;
  auto newcomer = ValueOf(Broker::Attach(dir_.state_dir()));
  ASSERT_TRUE(newcomer);
  ASSERT_TRUE(IsOk(newcomer->Register("beta")));
  ASSERT_EQ(Reaped(), 0u) << "registering must not have reaped: the tables are not full";
  uint8_t another[16];
  UuidNumber(kMaxGpus, another);
  EXPECT_TRUE(IsOk(newcomer->OpenLedger(another, kTestGpuTotal, 1024 * kMiB)));
  EXPECT_EQ(Reaped(), 1u);
  EXPECT_EQ(UsedOnAllLedgers(), 0u) << "the dead process's charge was not returned";
}

}  // namespace
}  // namespace gpuslice::broker
