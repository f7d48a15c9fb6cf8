// A ledger lock held past the broker's bound and then released (a holder stopped by a debugger or
// the cgroup freezer for 12 s, then resumed) must not cripple the process that gave up waiting:
// it refuses while the lock is not to be had, and goes on as soon as it is, crediting the frees it
// could not credit meanwhile. The process that waited once kept a "broken" mark for the rest of
// its life: every later allocation refused (0 of 380), its frees never credited.
//
// The holder is another process (a forked child holding the robust mutex, as a stopped process
// does); the bound is shortened to 200 ms in this process (SetLockTimeoutForTesting), so that the
// test takes a second, not the 10 s of the real bound.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "broker/broker.h"
#include "broker/lock_fault.h"
#include "broker/segment_layout.h"
#include "common/robust_mutex.h"
#include "tests/support/broker_test_util.h"

namespace gpuslice::broker {
namespace {

std::vector<std::string>* g_lines = nullptr;
void Collect(const char* line) {
  if (g_lines) g_lines->push_back(line);
}

class BrokerLockRecoveryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    g_lines = &lines_;
    SetFaultReporter(&Collect);
    SetLockTimeoutForTesting(200'000'000);
  }
  void TearDown() override {
    SetLockTimeoutForTesting(kRobustLockTimeoutNs);
    SetFaultReporter(nullptr);
    g_lines = nullptr;
    Release();
  }

  // A child process that takes `ledger`'s mutex and holds it until Release().
  void HoldLedgerLockElsewhere(LedgerId ledger) {
    int ready[2], go[2];
    ASSERT_EQ(pipe(ready), 0);
    ASSERT_EQ(pipe(go), 0);
    holder_ = fork();
    if (holder_ == 0) {
      close(ready[0]);
      close(go[1]);
      auto other = Broker::AttachExisting(dir_.state_dir());
      if (!other.ok()) _exit(1);
      Segment* segment = (*other)->segment();
      RobustLock lock(&At(*segment, ledger).mutex.mutex);
      char byte = lock.locked() ? '1' : '0';
      (void)!write(ready[1], &byte, 1);
      (void)!read(go[0], &byte, 1);  // until the test closes its end
      _exit(0);                      // the lock is released by the destructor first
    }
    close(ready[1]);
    close(go[0]);
    go_ = go[1];
    char byte = 0;
    ASSERT_EQ(read(ready[0], &byte, 1), 1);
    close(ready[0]);
    ASSERT_EQ(byte, '1');
  }
  // The holder lets go of the lock (as a stopped process resumed and finishing its update).
  void Release() {
    if (go_ >= 0) close(go_);
    go_ = -1;
    if (holder_ > 0) {
      int status = 0;
      waitpid(holder_, &status, 0);
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    holder_ = -1;
  }

  testing::BrokerTempDir dir_;
  std::vector<std::string> lines_;
  pid_t holder_ = -1;
  int go_ = -1;
};

TEST_F(BrokerLockRecoveryTest, ALockHeldPastTheBoundThenReleasedRefusesMeanwhileAndThenGoesOn) {
  auto broker = testing::ValueOf(Broker::Attach(dir_.state_dir()));
  ASSERT_TRUE(broker);
  ASSERT_TRUE(testing::IsOk(broker->Register("team-a")));
  const Result<LedgerId> opened = broker->OpenLedger(testing::kTestUuid, testing::kTestGpuTotal, 64 * testing::kMiB);
  ASSERT_TRUE(opened.ok()) << opened.message();
  const LedgerId ledger = *opened;
  ASSERT_TRUE(broker->Reserve(ledger, 16 * testing::kMiB));

  HoldLedgerLockElsewhere(ledger);
  EXPECT_FALSE(broker->Reserve(ledger, testing::kMiB)) << "refused while the lock is held (fail closed)";
  // Refused at once from then on, not after another full wait.
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(broker->Reserve(ledger, testing::kMiB));
  EXPECT_LT(testing::SecondsSince(start), 0.15);
  broker->Release(ledger, 16 * testing::kMiB);  // a free that cannot be credited now
  EXPECT_EQ(broker->Used(ledger), 16 * testing::kMiB) << "the charge stays while the lock is held";
  ASSERT_FALSE(lines_.empty());
  EXPECT_NE(lines_[0].find("has been held for 0.2 s"), std::string::npos) << lines_[0];

  Release();
  int granted = 0;
  for (int i = 0; i < 48; ++i) granted += broker->Reserve(ledger, testing::kMiB) ? 1 : 0;
  EXPECT_EQ(granted, 48) << "every allocation once the lock is free again";
  EXPECT_EQ(broker->Used(ledger), 48 * testing::kMiB) << "the free held back was credited";
  ASSERT_GE(lines_.size(), 2u);
  EXPECT_NE(lines_.back().find("is free again"), std::string::npos) << lines_.back();
  broker->Release(ledger, 48 * testing::kMiB);
  EXPECT_EQ(broker->Used(ledger), 0u);

  // A second stall of the same lock is said again.
  HoldLedgerLockElsewhere(ledger);
  const size_t said = lines_.size();
  EXPECT_FALSE(broker->Reserve(ledger, testing::kMiB));
  EXPECT_EQ(lines_.size(), said + 1);
  Release();
  EXPECT_TRUE(broker->Reserve(ledger, testing::kMiB));
}

// A process that first meets the stalled lock when it opens its ledger (its first allocation on
// the GPU) opens it once the lock is free.
TEST_F(BrokerLockRecoveryTest, OpeningALedgerWhoseLockWasHeldSucceedsOnceItIsFree) {
  auto first = testing::ValueOf(Broker::Attach(dir_.state_dir()));
  ASSERT_TRUE(testing::IsOk(first->Register("team-a")));
  const Result<LedgerId> opened = first->OpenLedger(testing::kTestUuid, testing::kTestGpuTotal, 64 * testing::kMiB);
  ASSERT_TRUE(opened.ok()) << opened.message();
  const LedgerId ledger = *opened;
  auto second = testing::ValueOf(Broker::Attach(dir_.state_dir()));
  ASSERT_TRUE(testing::IsOk(second->Register("team-a")));
  HoldLedgerLockElsewhere(ledger);
  EXPECT_FALSE(second->OpenLedger(testing::kTestUuid, testing::kTestGpuTotal, 64 * testing::kMiB).ok());
  Release();
  const Result<LedgerId> reopened = second->OpenLedger(testing::kTestUuid, testing::kTestGpuTotal, 64 * testing::kMiB);
  ASSERT_TRUE(testing::IsOk(reopened));
  EXPECT_TRUE(second->Reserve(*reopened, testing::kMiB));
}

}  // namespace
}  // namespace gpuslice::broker
