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
#include <random>
#include <thread>
#include <vector>

#include "broker/broker.h"
#include "broker/segment_file.h"
#include "broker/segment_layout.h"
#include "tests/support/broker_test_util.h"

namespace gpuslice::broker {
namespace {

using ::gpuslice::testing::BrokerTempDir;
using ::gpuslice::testing::ChildGroup;
using ::gpuslice::testing::kMiB;
using ::gpuslice::testing::kTestGpuTotal;
using ::gpuslice::testing::kTestUuid;
using ::gpuslice::testing::SecondsSince;
using ::gpuslice::testing::Shared;

constexpr uint64_t kQuota = 200 * kMiB;

// What the children report through shared memory.
struct Reports {
  std::atomic<uint64_t> refusals_seen{0};   // reservations a child saw refused
  std::atomic<uint64_t> refused_bytes{0};   // their sizes
  std::atomic<int> holding{0};              // children done refusing and waiting to be killed
  std::atomic<int> granted_wrongly{0};      // over-quota reservations that were granted
};

// Reads one ledger's counters through a read-only mapping, as the exporter does, and checks on
// every read that neither went backwards since the last.
class CounterWatch {
 public:
  explicit CounterWatch(const std::string& state_dir) : state_dir_(state_dir) {}

  void Start() {
    thread_ = std::thread([this] {
      while (!stop_.load()) {
        Sample();
        std::this_thread::sleep_for(std::chrono::microseconds(300));
      }
    });
  }
  void Stop() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
  }
  ~CounterWatch() { Stop(); }

  // Every tenant's counters summed over the file (there is one tenant and one GPU here).
  bool Sample() {
    std::string error;
    auto file = OpenSegmentFile(state_dir_, OpenMode::kReadOnly, &error);
    if (!file) return false;
    uint64_t allocations = 0, bytes = 0;
    for (const LedgerEntry& ledger : file->segment->ledgers) {
      allocations += ledger.refused_allocations.load();
      bytes += ledger.refused_bytes.load();
    }
    if (allocations < last_allocations_ || bytes < last_bytes_) backwards_.fetch_add(1);
    last_allocations_ = allocations;
    last_bytes_ = bytes;
    ++samples_;
    return true;
  }

  uint64_t allocations() const { return last_allocations_; }
  uint64_t bytes() const { return last_bytes_; }
  int backwards() const { return backwards_.load(); }
  int samples() const { return samples_; }

 private:
  std::string state_dir_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<int> backwards_{0};
  uint64_t last_allocations_ = 0, last_bytes_ = 0;
  int samples_ = 0;
};

// A tenant process: joins, reserves 1 MiB (within the quota), then asks `refusals` times for more
// than the quota, each time a different size.
int RefusedMember(const std::string& state_dir, int index, int refusals, bool hold, Reports* reports) {
  std::string error;
  auto broker = Broker::Attach(state_dir, &error);
  if (!broker || !broker->Register("tenant", &error)) return 3;
  const int ledger = broker->OpenLedger(kTestUuid, kTestGpuTotal, kQuota, &error);
  if (ledger < 0 || !broker->Reserve(ledger, kMiB)) return 4;
  for (int r = 0; r < refusals; ++r) {
    const uint64_t bytes = kQuota + 1 + static_cast<uint64_t>(index) * 7 + static_cast<uint64_t>(r);
    if (broker->Reserve(ledger, bytes)) {
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

TEST(BrokerRefusalCounterTest, ThousandRefusalsAcrossProcessesCountedExactlyThroughSigkills) {
  BrokerTempDir dir;
  Shared<Reports> reports;
  {
    std::string error;
    ASSERT_TRUE(Broker::Attach(dir.state_dir(), &error)) << error;  // create the file for the watcher
  }
  CounterWatch watch(dir.state_dir());
  watch.Start();
  constexpr int kProcesses = 200, kRefusalsEach = 5, kBatch = 25;  // 1,000 refusals, 100 killed
  ChildGroup children;
  int killed = 0;
  for (int first = 0; first < kProcesses; first += kBatch) {
    std::vector<pid_t> exiting, holding;
    const int holding_before = reports->holding.load();
    for (int i = first; i < first + kBatch; ++i) {
      const bool hold = i % 2 == 0;
      const pid_t pid = children.Fork([&, i, hold] { return RefusedMember(dir.state_dir(), i, kRefusalsEach, hold, &*reports); });
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
  watch.Stop();
  EXPECT_EQ(killed, 100);
  EXPECT_EQ(reports->granted_wrongly.load(), 0);
  ASSERT_EQ(reports->refusals_seen.load(), 1000u);

  // Reaping the killed processes returns their charges and leaves the counters as they were.
  Snapshot snapshot;
  std::string error;
  ASSERT_TRUE(TakeSnapshot(dir.state_dir(), &snapshot, &error)) << error;
  ASSERT_EQ(snapshot.gpus.size(), 1u);
  ASSERT_EQ(snapshot.gpus[0].tenants.size(), 1u);
  const TenantView& tenant = snapshot.gpus[0].tenants[0];
  EXPECT_EQ(tenant.used, 0u) << "the killed processes' MiB were not returned";
  EXPECT_EQ(tenant.refused_allocations, 1000u);
  EXPECT_EQ(tenant.refused_bytes, reports->refused_bytes.load());
  ASSERT_TRUE(watch.Sample());
  EXPECT_EQ(watch.allocations(), 1000u);
  EXPECT_EQ(watch.bytes(), reports->refused_bytes.load());
  EXPECT_EQ(watch.backwards(), 0) << "a counter went backwards in one of " << watch.samples() << " reads";
  EXPECT_GT(watch.samples(), 10);
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
  Snapshot snapshot;
  std::string error;
  ASSERT_TRUE(TakeSnapshot(dir.state_dir(), &snapshot, &error)) << error;
  ASSERT_EQ(snapshot.gpus.size(), 1u);
  ASSERT_EQ(snapshot.gpus[0].tenants.size(), 1u);
  const TenantView& tenant = snapshot.gpus[0].tenants[0];
  const uint64_t seen = reports->refusals_seen.load();
  EXPECT_GT(seen, 0u);
  EXPECT_GE(tenant.refused_allocations, seen);
  EXPECT_LE(tenant.refused_allocations, seen + kProcesses);
  EXPECT_EQ(tenant.used, 0u);
}

}  // namespace
}  // namespace gpuslice::broker
