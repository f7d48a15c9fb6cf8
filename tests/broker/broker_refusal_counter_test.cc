// The refusal counters of a ledger (refused_allocations, refused_bytes: segment_layout.h) count
// every reservation the broker refused, exactly, across processes, whether those processes exit,
// unregister or are SIGKILLed, and they never go backwards (not when dead processes are reaped).
// The counts are asserted exactly, so a broker that does not count (they would read 0) fails.
#include <signal.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include "broker/broker.h"
#include "broker/segment_file.h"
#include "broker/segment_layout.h"
#include "broker/snapshot.h"
#include "tests/support/broker_test_names.h"

namespace gpuslice::broker {
namespace {

constexpr uint64_t kQuota = 200 * kMiB;

// What the children report through shared memory.
struct Reports {
  std::atomic<uint64_t> refusals_seen{0};  // reservations a child saw refused
  std::atomic<uint64_t> refused_bytes{0};  // their sizes
  std::atomic<int> holding{0};             // children done refusing and waiting to be killed
  std::atomic<int> granted_wrongly{0};     // over-quota reservations that were granted
};

// Reads the counters through a read-only mapping, as the exporter does, and checks on every
// read that neither went backwards since the last. It runs in a process of its own (forked
// first): a thread would make every later fork() of the test copy whatever lock it held.
struct WatchState {
  std::atomic<bool> stop{false};
  std::atomic<int> backwards{0};
  std::atomic<int> samples{0};
  std::atomic<uint64_t> allocations{0};
  std::atomic<uint64_t> bytes{0};
};

bool Sample(const std::string& state_dir, WatchState* watch) {
  auto opened = OpenSegmentFile(state_dir, OpenMode::kReadOnly);
  if (!opened.ok()) return false;
  const std::unique_ptr<SegmentFile> file = std::move(opened).value();
  uint64_t allocations = 0, bytes = 0;
  for (const LedgerEntry& ledger : file->segment->ledgers) {
    allocations += ledger.refused_allocations.load();
    bytes += ledger.refused_bytes.load();
  }
  if (allocations < watch->allocations.load() || bytes < watch->bytes.load()) watch->backwards.fetch_add(1);
  watch->allocations.store(allocations);
  watch->bytes.store(bytes);
  watch->samples.fetch_add(1);
  return true;
}

pid_t StartWatcher(ChildGroup* children, const std::string& state_dir, WatchState* watch) {
  return children->Fork([=] {
    while (!watch->stop.load()) {
      Sample(state_dir, watch);
      std::this_thread::sleep_for(std::chrono::microseconds(300));
    }
    return 0;
  });
}

// A tenant process: joins, reserves 1 MiB (within the quota), then asks `refusals` times for more
// than the quota, each time a different size.
int RefusedMember(const std::string& state_dir, int index, int refusals, bool hold, Reports* reports) {
  std::string error;
  Result<std::unique_ptr<Broker>> attached = Broker::Attach(state_dir);
  if (!attached.ok()) return 3;
  std::unique_ptr<Broker> broker = std::move(attached).value();
  if (!broker->Register("tenant").ok()) return 3;
  const Result<LedgerId> ledger = broker->OpenLedger(kTestUuid, kTestGpuTotal, kQuota);
  if (!ledger.ok() || !broker->Reserve(*ledger, kMiB)) return 4;
  for (int r = 0; r < refusals; ++r) {
    const uint64_t bytes = kQuota + 1 + static_cast<uint64_t>(index) * 7 + static_cast<uint64_t>(r);
    if (broker->Reserve(*ledger, bytes)) {
      reports->granted_wrongly.fetch_add(1);
      return 5;
    }
    reports->refusals_seen.fetch_add(1);
    reports->refused_bytes.fetch_add(bytes);
  }
  if (hold) {  // killed by the test while registered, holding its MiB
    reports->holding.fetch_add(1);
    while (true) pause();
  }
  broker->Unregister();
  return 0;
}

// The one tenant on the one GPU, as gpuslicectl sees it (after reaping the dead).
std::optional<TenantView> OnlyTenant(const std::string& state_dir) {
  std::string error;
  Result<Snapshot> taken = TakeSnapshot(state_dir);
  EXPECT_TRUE(taken.ok()) << taken.message();
  Snapshot snapshot = taken.ok() ? std::move(taken).value() : Snapshot();
  if (snapshot.gpus.size() != 1 || snapshot.gpus[0].tenants.size() != 1) {
    ADD_FAILURE() << "expected one GPU with one tenant";
    return std::nullopt;
  }
  return snapshot.gpus[0].tenants[0];
}

TEST(BrokerRefusalCounterTest, ThousandRefusalsAcrossProcessesCountedExactlyThroughSigkills) {
  BrokerTempDir dir;
  Shared<Reports> reports;
  {
    std::string error;
    ASSERT_TRUE(IsOk(Broker::Attach(dir.state_dir())));  // create the file for the watcher
  }
  Shared<WatchState> watch;
  ChildGroup children;
  const pid_t watcher = StartWatcher(&children, dir.state_dir(), &*watch);
  constexpr int kProcesses = 200, kRefusalsEach = 5, kBatch = 25;  // 1,000 refusals, 100 killed
  int killed = 0;
  for (int first = 0; first < kProcesses; first += kBatch) {
    std::vector<pid_t> exiting, holding;
    const int holding_before = reports->holding.load();
    for (int i = first; i < first + kBatch; ++i) {
      const bool hold = i % 2 == 0;
      const pid_t pid =
          children.Fork([&, i, hold] { return RefusedMember(dir.state_dir(), i, kRefusalsEach, hold, &*reports); });
      (hold ? holding : exiting).push_back(pid);
    }
    for (pid_t pid : exiting) ASSERT_EQ(children.Wait(pid), 0);
    const auto start = std::chrono::steady_clock::now();
    while (reports->holding.load() < holding_before + static_cast<int>(holding.size()) && SecondsSince(start) < 60)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    ASSERT_EQ(reports->holding.load(), holding_before + static_cast<int>(holding.size()));
    for (pid_t pid : holding) {  // SIGKILLed while registered: never unregistered
      kill(pid, SIGKILL);
      EXPECT_EQ(children.Wait(pid), 128 + SIGKILL);
      ++killed;
    }
  }
  watch->stop.store(true);
  EXPECT_EQ(children.Wait(watcher), 0);
  EXPECT_EQ(killed, 100);
  EXPECT_EQ(reports->granted_wrongly.load(), 0);
  ASSERT_EQ(reports->refusals_seen.load(), 1000u);

  // Reaping the killed processes returns their charges and leaves the counters as they were.
  const std::optional<TenantView> view = OnlyTenant(dir.state_dir());
  ASSERT_TRUE(view);
  const TenantView& tenant = *view;
  EXPECT_EQ(tenant.used, 0u) << "the killed processes' MiB were not returned";
  EXPECT_EQ(tenant.refused_allocations, 1000u);
  EXPECT_EQ(tenant.refused_bytes, reports->refused_bytes.load());
  ASSERT_TRUE(Sample(dir.state_dir(), &*watch));
  EXPECT_EQ(watch->allocations.load(), 1000u);
  EXPECT_EQ(watch->bytes.load(), reports->refused_bytes.load());
  EXPECT_EQ(watch->backwards.load(), 0) << "a counter went backwards in one of " << watch->samples.load() << " reads";
  EXPECT_GT(watch->samples.load(), 10);
}

// Processes SIGKILLed at any instant of a refusal loop: each refusal a process saw is counted; one
// killed between counting and returning may add at most one refusal nobody saw.
TEST(BrokerRefusalCounterTest, KilledMidReservationCountAtMostOneUnseenRefusalEach) {
  BrokerTempDir dir;
  Shared<Reports> reports;
  ChildGroup children;
  constexpr int kProcesses = 16;
  std::vector<pid_t> pids;
  for (int i = 0; i < kProcesses; ++i) {
    pids.push_back(children.Fork([&, i] { return RefusedMember(dir.state_dir(), i, 1 << 30, false, &*reports); }));
  }
  std::mt19937 random(13);
  for (pid_t pid : pids) {
    std::this_thread::sleep_for(std::chrono::microseconds(2000 + random() % 20000));
    kill(pid, SIGKILL);
    EXPECT_EQ(children.Wait(pid), 128 + SIGKILL);
  }
  EXPECT_EQ(reports->granted_wrongly.load(), 0);
  const std::optional<TenantView> view = OnlyTenant(dir.state_dir());
  ASSERT_TRUE(view);
  const TenantView& tenant = *view;
  const uint64_t seen = reports->refusals_seen.load();
  EXPECT_GT(seen, 0u);
  EXPECT_GE(tenant.refused_allocations, seen);
  EXPECT_LE(tenant.refused_allocations, seen + kProcesses);
  EXPECT_EQ(tenant.used, 0u);
}

}  // namespace
}  // namespace gpuslice::broker
