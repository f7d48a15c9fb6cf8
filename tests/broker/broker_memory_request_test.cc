// Memory requests across tenants (broker/memory_requests.h): borrowers of several processes and
// threads racing beside a held request never take its memory, not even momentarily, and get
// exactly the rest when they race to the limit; the owner is never refused within its request
// meanwhile; SIGKILLs in the middle of borrowing leave the GPU exact; the node's announcement
// holds a request with no process at all, and holds it when borrowers have the memory (who then
// only give back), and requests over the GPU are refused.
#include <sched.h>
#include <signal.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <deque>
#include <random>
#include <thread>
#include <vector>

#include "broker/broker.h"
#include "broker/snapshot.h"
#include "tests/support/broker_test_names.h"

namespace gpuslice::broker {
namespace {

using ::testing::HasSubstr;

constexpr uint64_t kGpu = 100 * kMiB;
constexpr uint64_t kRequest = 40 * kMiB;
constexpr int kProcesses = 4;
constexpr int kThreads = 4;
constexpr int kChurnRounds = 4000;

struct Board {
  std::atomic<uint64_t> held{0};  // granted to borrowers and not yet given back
  std::atomic<uint64_t> most_held{0};
  std::atomic<int> arrived{0};
  std::atomic<int> churned{0};
  std::atomic<int> finished{0};
  std::atomic<bool> may_exit{false};
  std::atomic<uint64_t> granted_at_the_limit{0};
  std::atomic<uint64_t> refusals{0};
};

void WaitFor(const std::atomic<int>& counter, int value) {
  while (counter.load() < value) sched_yield();
}

void NoteGrant(Board* board, uint64_t bytes) {
  const uint64_t now = board->held.fetch_add(bytes) + bytes;
  uint64_t most = board->most_held.load();
  while (now > most && !board->most_held.compare_exchange_weak(most, now)) {
  }
}

// Keeps up to four reservations of 1-8 MiB for `rounds`, then gives them back.
void Churn(Broker* broker, LedgerId ledger, Board* board, unsigned seed, int rounds) {
  std::mt19937 random(seed);
  std::deque<uint64_t> mine;
  for (int i = 0; i < rounds; ++i) {
    if (i % 64 == 0) sched_yield();
    const uint64_t bytes = (random() % 8 + 1) * kMiB;
    if (mine.size() < 4 && broker->Reserve(ledger, bytes)) {
      if (board) NoteGrant(board, bytes);
      mine.push_back(bytes);
      continue;
    }
    if (mine.size() < 4 && board) board->refusals.fetch_add(1);
    if (!mine.empty()) {
      if (board) board->held.fetch_sub(mine.front());
      broker->Release(ledger, mine.front());
      mine.pop_front();
    }
  }
  for (uint64_t bytes : mine) {
    if (board) board->held.fetch_sub(bytes);
    broker->Release(ledger, bytes);
  }
}

std::unique_ptr<Broker> Tenant(const std::string& state_dir, const std::string& name, MemoryShare share,
                               std::optional<LedgerId>* ledger) {
  Result<std::unique_ptr<Broker>> attached = Broker::Attach(state_dir);
  if (!attached.ok()) return nullptr;
  std::unique_ptr<Broker> broker = std::move(attached).value();
  if (!broker->Register(name).ok()) return nullptr;
  const Result<LedgerId> opened = broker->OpenLedger(kTestUuid, kGpu, share);
  if (!opened.ok()) return nullptr;
  *ledger = *opened;
  return broker;
}

// A borrower of its own tenant (no request, no limit): four threads churn, then race to the limit.
int BorrowingProcess(const std::string& state_dir, Board* board, int index) {
  std::optional<LedgerId> ledger;
  std::unique_ptr<Broker> broker = Tenant(state_dir, "borrower-" + std::to_string(index), {}, &ledger);
  if (!broker) return 1;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      board->arrived.fetch_add(1);
      WaitFor(board->arrived, kProcesses * kThreads);
      Churn(broker.get(), *ledger, board, static_cast<unsigned>(index * kThreads + t), kChurnRounds);
      board->churned.fetch_add(1);
      WaitFor(board->churned, kProcesses * kThreads);
      uint64_t granted = 0;
      // Bounded by the GPU: a broker that let borrowers take everything fails here, not hangs.
      while (granted < kGpu && broker->Reserve(*ledger, kMiB)) {
        NoteGrant(board, kMiB);
        granted += kMiB;
      }
      board->granted_at_the_limit.fetch_add(granted);
    });
  }
  for (auto& thread : threads) thread.join();
  board->finished.fetch_add(1);
  while (!board->may_exit.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  _exit(0);
}

TEST(BrokerMemoryRequestTest, BorrowersRacingBesideAHeldRequestNeverTakeItsMemory) {
  BrokerTempDir dir;
  std::optional<LedgerId> owner_ledger;
  std::unique_ptr<Broker> owner = Tenant(dir.state_dir(), "owner", {kRequest, kGpu}, &owner_ledger);
  ASSERT_TRUE(owner);
  Shared<Board> board;
  ChildGroup group;
  std::vector<pid_t> children;
  for (int p = 0; p < kProcesses; ++p)
    children.push_back(group.Fork([&, p] { return BorrowingProcess(dir.state_dir(), &*board, p); }));
  // Meanwhile the owner churns within its request: never refused, whatever the borrowers do.
  uint64_t owner_refusals = 0;
  while (board->finished.load() < kProcesses) {
    for (pid_t child : children) ASSERT_FALSE(group.Exited(child)) << "a borrowing process failed";
    if (owner->Reserve(*owner_ledger, kRequest)) {
      owner->Release(*owner_ledger, kRequest);
    } else {
      ++owner_refusals;
    }
  }
  std::printf("%d borrowing tenants x %d threads: most borrowed at once %.0f MiB of %.0f MiB unreserved\n", kProcesses,
              kThreads, static_cast<double>(board->most_held.load()) / kMiB,
              static_cast<double>(kGpu - kRequest) / kMiB);
  EXPECT_GT(board->refusals.load(), 0u) << "the borrowers never reached the unreserved memory's end";
  EXPECT_LE(board->most_held.load(), kGpu - kRequest) << "borrowers held memory the request reserves";
  EXPECT_EQ(board->granted_at_the_limit.load(), kGpu - kRequest) << "racing to the limit: exactly the rest";
  EXPECT_EQ(owner_refusals, 0u) << "the owner was refused within its request";
  EXPECT_TRUE(owner->Reserve(*owner_ledger, kRequest));
  board->may_exit.store(true);
  for (pid_t child : children) EXPECT_EQ(group.Wait(child), 0);
}

// Borrowers SIGKILLed at random moments, the GPU's memory lock or a ledger's held or not: once
// they are reaped, the owner has all of its request and a borrower exactly the rest.
TEST(BrokerMemoryRequestTest, BorrowersKilledMidBorrowLeaveTheGpuExact) {
  BrokerTempDir dir;
  std::optional<LedgerId> owner_ledger;
  std::unique_ptr<Broker> owner = Tenant(dir.state_dir(), "owner", {kRequest, kGpu}, &owner_ledger);
  ASSERT_TRUE(owner);
  ChildGroup group;
  std::mt19937 random(7);
  int kills = 0;
  const auto start = std::chrono::steady_clock::now();
  while (SecondsSince(start) < 1.0) {
    std::vector<pid_t> round;
    for (int p = 0; p < 3; ++p) {
      round.push_back(group.Fork([&, p] {
        std::optional<LedgerId> ledger;
        std::unique_ptr<Broker> broker = Tenant(dir.state_dir(), "borrower-" + std::to_string(p), {}, &ledger);
        if (!broker) return 1;
        for (;;) Churn(broker.get(), *ledger, nullptr, static_cast<unsigned>(getpid()), 1000);
      }));
    }
    std::this_thread::sleep_for(std::chrono::microseconds(2000 + random() % 8000));
    for (pid_t pid : round) {
      kill(pid, SIGKILL);
      group.Wait(pid);
      ++kills;
    }
  }
  std::optional<LedgerId> ledger;
  std::unique_ptr<Broker> borrower = Tenant(dir.state_dir(), "borrower-0", {}, &ledger);
  ASSERT_TRUE(borrower);
  uint64_t granted = 0;
  while (granted < kGpu && borrower->Reserve(*ledger, kMiB)) granted += kMiB;  // bounded, as above
  std::printf("%d borrowers killed mid-borrow\n", kills);
  EXPECT_EQ(granted, kGpu - kRequest) << "after " << kills << " kills";
  EXPECT_TRUE(owner->Reserve(*owner_ledger, kRequest));
}

// The node (the device plugin's Allocate, the DRA driver's prepare) holds a request before any
// process of its tenant runs, and until it withdraws it.
TEST(BrokerMemoryRequestTest, AnAnnouncedRequestIsHeldWithoutAProcessUntilWithdrawn) {
  BrokerTempDir dir;
  std::unique_ptr<Broker> node = ValueOf(Broker::Attach(dir.state_dir()));
  ASSERT_TRUE(node);
  std::string warning;
  ASSERT_TRUE(IsOk(
      node->AnnounceRequest("pod-a", kTestUuid, kGpu, {kRequest, kRequest}, MemoryAnnouncer::kDraDriver, &warning)));
  EXPECT_EQ(warning, "");
  std::optional<LedgerId> ledger;
  std::unique_ptr<Broker> borrower = Tenant(dir.state_dir(), "borrower", {}, &ledger);
  ASSERT_TRUE(borrower);
  EXPECT_TRUE(borrower->Reserve(*ledger, kGpu - kRequest));
  EXPECT_FALSE(borrower->Reserve(*ledger, kMiB)) << "the announced request is held with no process of its tenant";
  ASSERT_EQ(node->Announced(MemoryAnnouncer::kDraDriver).size(), 1u);
  EXPECT_EQ(node->Announced(MemoryAnnouncer::kDraDriver)[0].tenant, "pod-a");
  EXPECT_TRUE(node->Announced(MemoryAnnouncer::kDevicePlugin).empty());
  ASSERT_TRUE(IsOk(node->WithdrawRequest("pod-a", kTestUuid, MemoryAnnouncer::kDraDriver)));
  EXPECT_TRUE(borrower->Reserve(*ledger, kMiB)) << "withdrawn, the request no longer reserves anything";
  EXPECT_TRUE(node->Announced(MemoryAnnouncer::kDraDriver).empty());
}

// An announcement finds borrowers holding its memory: it is held all the same, says who they
// are, and the borrowers can then only give back; requests over the GPU are refused.
TEST(BrokerMemoryRequestTest, AnAnnouncementHoldsItsRequestFromBorrowersAndRefusesRequestsOverTheGpu) {
  BrokerTempDir dir;
  std::optional<LedgerId> ledger;
  std::unique_ptr<Broker> borrower = Tenant(dir.state_dir(), "borrower", {}, &ledger);
  ASSERT_TRUE(borrower);
  ASSERT_TRUE(borrower->Reserve(*ledger, 80 * kMiB));
  std::unique_ptr<Broker> node = ValueOf(Broker::Attach(dir.state_dir()));
  std::string warning;
  ASSERT_TRUE(IsOk(
      node->AnnounceRequest("pod-a", kTestUuid, kGpu, {kRequest, kGpu}, MemoryAnnouncer::kDevicePlugin, &warning)));
  EXPECT_THAT(warning, HasSubstr("tenant 'pod-a' cannot hold its memory request of 40 MiB"));
  EXPECT_THAT(warning, HasSubstr("20 MiB of it is borrowed (tenant 'borrower' 80 MiB beyond no request)"));
  EXPECT_FALSE(borrower->Reserve(*ledger, kMiB)) << "a borrower only gives back while a request is owed";
  borrower->Release(*ledger, 30 * kMiB);
  EXPECT_TRUE(borrower->Reserve(*ledger, 10 * kMiB)) << "50 + 40 of 100: 10 MiB is nobody's again";
  EXPECT_FALSE(borrower->Reserve(*ledger, kMiB));
  const std::string refused = ErrorOf(node->AnnounceRequest("pod-b", kTestUuid, kGpu, {70 * kMiB, 70 * kMiB},
                                                            MemoryAnnouncer::kDevicePlugin, &warning));
  EXPECT_THAT(refused, HasSubstr("tenant 'pod-b' asks GPU GPU-"));
  EXPECT_THAT(refused, HasSubstr("for a memory request of 70 MiB, but the requests held there already reserve 40 MiB "
                                 "(tenant 'pod-a' 40 MiB)"));
  // What the snapshot shows of them.
  const Snapshot snapshot = ValueOf(TakeSnapshot(dir.state_dir()));
  ASSERT_EQ(snapshot.gpus.size(), 1u);
  for (const TenantView& tenant : snapshot.gpus[0].tenants) {
    if (tenant.name == "pod-a") {
      EXPECT_EQ(tenant.request, kRequest);
      EXPECT_EQ(tenant.quota, kGpu);
      EXPECT_EQ(tenant.announced, MemoryAnnouncer::kDevicePlugin);
    }
    if (tenant.name == "borrower") EXPECT_EQ(tenant.borrowed(), 60 * kMiB);
  }
}

}  // namespace
}  // namespace gpuslice::broker
