// Hundreds of processes attaching at once must not stall (a peer took a minute): 200 processes,
// released together, each attach, register, open a ledger, reserve, release and unregister. The
// first round creates the state file while they race; the second finds it in place.
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <vector>

#include "broker/broker.h"
#include "broker/snapshot.h"
#include "common/clock.h"
#include "tests/support/broker_test_names.h"

namespace gpuslice::broker {
namespace {

constexpr int kProcesses = 200;

struct Timings {
  std::atomic<uint64_t> attach_ns[kProcesses];    // Broker::Attach alone
  std::atomic<uint64_t> sequence_ns[kProcesses];  // Attach through Unregister
};

int Client(const std::string& state_dir, int start_fd, Timings* timings, int index) {
  char go;
  if (read(start_fd, &go, 1) != 0) return 3;  // EOF when the test closes the pipe: all start together
  const uint64_t start = MonotonicNanos();
  Result<std::unique_ptr<Broker>> attach = Broker::Attach(state_dir);
  const uint64_t attached = MonotonicNanos();
  if (!attach.ok()) {
    std::fprintf(stderr, "%s\n", attach.message().c_str());
    return 1;
  }
  const std::unique_ptr<Broker> broker = std::move(attach).value();
  if (!broker->Register("crowd-" + std::to_string(index % 8)).ok()) return 1;
  const Result<LedgerId> ledger = broker->OpenLedger(kTestUuid, kTestGpuTotal, 1ULL << 40);
  if (!ledger.ok() || !broker->Reserve(*ledger, kMiB)) return 1;
  broker->Release(*ledger, kMiB);
  broker->Unregister();
  timings->attach_ns[index].store(attached - start);
  timings->sequence_ns[index].store(MonotonicNanos() - start);
  return 0;
}

double Percentile(std::vector<uint64_t> values, double fraction) {
  std::sort(values.begin(), values.end());
  const size_t index = std::min(values.size() - 1, static_cast<size_t>(fraction * values.size()));
  return values[index] / 1e6;
}

// Runs one round; returns the wall time in seconds from the start signal to the last exit.
double Round(const std::string& state_dir, const char* name) {
  Shared<Timings> timings;
  int start[2];
  EXPECT_EQ(pipe(start), 0);
  ChildGroup group;
  std::vector<pid_t> pids;
  for (int i = 0; i < kProcesses; ++i) {
    pids.push_back(group.Fork([&, i] {
      close(start[1]);
      return Client(state_dir, start[0], &*timings, i);
    }));
  }
  close(start[0]);
  const uint64_t begin = MonotonicNanos();
  close(start[1]);  // go
  int failed = 0;
  for (pid_t pid : pids) failed += group.Wait(pid) != 0;
  const double wall = (MonotonicNanos() - begin) / 1e9;
  EXPECT_EQ(failed, 0);
  std::vector<uint64_t> attach, sequence;
  for (int i = 0; i < kProcesses; ++i) {
    attach.push_back(timings->attach_ns[i].load());
    sequence.push_back(timings->sequence_ns[i].load());
  }
  std::printf(
      "%s: %d processes, wall %.3f s; Attach p50 %.3f ms, p99 %.3f ms, max %.3f ms; "
      "Attach..Unregister p50 %.3f ms, p99 %.3f ms, max %.3f ms\n",
      name, kProcesses, wall, Percentile(attach, 0.5), Percentile(attach, 0.99), Percentile(attach, 1.0),
      Percentile(sequence, 0.5), Percentile(sequence, 0.99), Percentile(sequence, 1.0));
  return wall;
}

TEST(BrokerAttachScaleTest, TwoHundredProcessesAttachingAtOnceDoNotStall) {
  BrokerTempDir dir;
  EXPECT_LT(Round(dir.state_dir(), "cold (racing to create the file)"), 30.0);
  EXPECT_LT(Round(dir.state_dir(), "warm (file in place)"), 30.0);
  std::string error;
  Result<Snapshot> taken = TakeSnapshot(dir.state_dir());
  ASSERT_TRUE(taken.ok()) << taken.message();
  Snapshot snapshot = taken.ok() ? std::move(taken).value() : Snapshot();
  ASSERT_EQ(snapshot.gpus.size(), 1u);
  EXPECT_EQ(snapshot.gpus[0].tenants.size(), 8u);
  for (const TenantView& tenant : snapshot.gpus[0].tenants) {
    EXPECT_EQ(tenant.used, 0u) << tenant.name;
    EXPECT_TRUE(tenant.processes.empty()) << tenant.name;
  }
}

}  // namespace
}  // namespace gpuslice::broker
