// Threads of several processes racing for one tenant's quota: the ledger never grants more than
// the quota, not even momentarily, and grants all of it when they race to the limit.
#include <sched.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <deque>
#include <random>
#include <thread>
#include <vector>

#include "broker/broker.h"
#include "tests/support/broker_test_names.h"

namespace gpuslice::broker {
namespace {

constexpr int kProcesses = 4;
constexpr int kThreads = 4;
constexpr uint64_t kQuota = 100 * kMiB;
constexpr int kChurnRounds = 20000;

// What the racers report, in memory shared with the test.
struct Board {
  std::atomic<uint64_t> held{0};       // granted and not yet given back, over every racer
  std::atomic<uint64_t> most_held{0};  // the high-water mark of `held`
  std::atomic<int> arrived{0};         // barrier counters
  std::atomic<int> churned{0};
  std::atomic<int> finished{0};
  std::atomic<bool> may_exit{false};
  std::atomic<uint64_t> granted_at_the_limit{0};
  std::atomic<uint64_t> refusals{0};
};

void WaitFor(const std::atomic<int>& counter, int value) {
  while (counter.load() < value) sched_yield();
}

// `held` rises after a grant and falls before the release, so it never exceeds what the ledger
// has granted at that instant: its maximum is a lower bound of the ledger's.
void NoteGrant(Board* board, uint64_t bytes) {
  const uint64_t now = board->held.fetch_add(bytes) + bytes;
  uint64_t most = board->most_held.load();
  while (now > most && !board->most_held.compare_exchange_weak(most, now)) {
  }
}

void Racer(Broker* broker, LedgerId ledger, Board* board, unsigned seed) {
  std::mt19937 random(seed);
  board->arrived.fetch_add(1);
  WaitFor(board->arrived, kProcesses * kThreads);
  // Churn: each thread keeps up to four reservations of 1-8 MiB, so that together they ask for
  // about three times the quota and are refused often.
  std::deque<uint64_t> mine;
  for (int i = 0; i < kChurnRounds; ++i) {
    if (i % 64 == 0) sched_yield();  // let others run while this thread holds reservations
    const uint64_t bytes = (random() % 8 + 1) * kMiB;
    if (mine.size() < 4 && broker->Reserve(ledger, bytes)) {
      NoteGrant(board, bytes);
      mine.push_back(bytes);
      continue;
    }
    if (mine.size() < 4) board->refusals.fetch_add(1);
    if (!mine.empty()) {
      board->held.fetch_sub(mine.front());
      broker->Release(ledger, mine.front());
      mine.pop_front();
    }
  }
  for (uint64_t bytes : mine) {
    board->held.fetch_sub(bytes);
    broker->Release(ledger, bytes);
  }
  board->churned.fetch_add(1);
  WaitFor(board->churned, kProcesses * kThreads);
  // Race to the limit: 1 MiB at a time until refused. Nothing is released any more.
  uint64_t granted = 0;
  while (broker->Reserve(ledger, kMiB)) {
    NoteGrant(board, kMiB);
    granted += kMiB;
  }
  board->granted_at_the_limit.fetch_add(granted);
}

int RacingProcess(const std::string& state_dir, Board* board, int index) {
  std::string error;
  Result<std::unique_ptr<Broker>> attached = Broker::Attach(state_dir);
  if (!attached.ok()) return 1;
  std::unique_ptr<Broker> broker = std::move(attached).value();
  if (!broker->Register("racers").ok()) return 1;
  const Result<LedgerId> ledger = broker->OpenLedger(kTestUuid, kTestGpuTotal, kQuota);
  if (!ledger.ok()) return 1;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back(Racer, broker.get(), *ledger, board, static_cast<unsigned>(index * kThreads + t));
  }
  for (auto& thread : threads) thread.join();
  board->finished.fetch_add(1);
  while (!board->may_exit.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  // Exit without unregistering: the test then checks that reaping returns everything.
  _exit(0);
}

TEST(BrokerConcurrencyTest, ThreadsOfSeveralProcessesRacingToTheLimitNeverExceedTheQuota) {
  BrokerTempDir dir;
  Shared<Board> board;
  ChildGroup group;
  std::vector<pid_t> children;
  for (int p = 0; p < kProcesses; ++p) {
    children.push_back(group.Fork([&, p] { return RacingProcess(dir.state_dir(), &*board, p); }));
  }
  while (board->finished.load() < kProcesses) {
    for (pid_t child : children) ASSERT_FALSE(group.Exited(child)) << "a racing process failed to attach";
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }

  std::printf("%d processes x %d threads: most granted at once %.1f MiB of %.0f MiB; %llu refusals while churning\n",
              kProcesses, kThreads, static_cast<double>(board->most_held.load()) / kMiB,
              static_cast<double>(kQuota) / kMiB, static_cast<unsigned long long>(board->refusals.load()));
  EXPECT_GT(board->refusals.load(), 0u) << "the racers never reached the limit";
  EXPECT_LE(board->most_held.load(), kQuota) << "more than the quota was granted at one instant";
  EXPECT_EQ(board->granted_at_the_limit.load(), kQuota) << "racing to the limit grants exactly the quota";
  std::string error;
  auto observer = ValueOf(Broker::Attach(dir.state_dir()));
  ASSERT_TRUE(observer);
  ASSERT_TRUE(IsOk(observer->Register("racers")));
  const Result<LedgerId> ledger_or = observer->OpenLedger(kTestUuid, kTestGpuTotal, kQuota);
  ASSERT_TRUE(IsOk(ledger_or));
  const LedgerId ledger = *ledger_or;
  EXPECT_EQ(observer->Used(ledger), kQuota);
  EXPECT_FALSE(observer->Reserve(ledger, 1));

  board->may_exit.store(true);
  for (pid_t child : children) EXPECT_EQ(group.Wait(child), 0);
  EXPECT_TRUE(observer->Reserve(ledger, kQuota)) << "the exited racers' charges are reaped on demand";
  observer->Release(ledger, kQuota);
  EXPECT_EQ(observer->Used(ledger), 0u);
}

}  // namespace
}  // namespace gpuslice::broker
