// Reserve-then-allocate under contention: several processes of one tenant, each with several
// threads, all start allocating at the same instant and race to the quota. Together they never
// get more than the quota — not even momentarily, since they all hold what they got until
// every one has finished — and, when the chunks divide it, exactly the quota. The simulated
// device's own record agrees with what the programs report and with the broker's ledger.
#include <time.h>

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "gpuslice/sim_query.h"
#include "tests/support/shim_fixture.h"

namespace gpuslice::testing {
namespace {

class ShimConcurrencyTest : public ShimTest {
 protected:
  static int64_t RealtimeMs() {
    timespec ts{};
    clock_gettime(CLOCK_REALTIME, &ts);
    return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
  }

  // Starts one holder per command, all told to start allocating at the same moment (late
  // enough for every process to be up, even on a loaded machine), and returns the bytes each
  // reports holding.
  std::vector<uint64_t> Race(const std::vector<std::vector<std::string>>& commands,
                             const std::vector<std::string>& env) {
    const std::string start_at = std::to_string(RealtimeMs() + 500);
    for (auto argv : commands) {
      argv.insert(argv.end(), {"--start-at", start_at, "--hold", "60"});
      holders_.push_back(StartShimmed(argv, env));
    }
    std::vector<uint64_t> held;
    for (auto& h : holders_) {
      EXPECT_TRUE(h->WaitForOutput("\"event\":\"holding\"", 30000)) << h->StdoutSoFar();
      held.push_back(EventOf(h->StdoutSoFar(), "holding").value("bytes_obtained", uint64_t{0}));
    }
    return held;
  }

  // Device memory held by live processes, per the simulated device itself.
  uint64_t DeviceMemoryInUse() const {
    simquery::Snapshot snapshot;
    std::string error;
    EXPECT_TRUE(simquery::TakeSnapshot(state_path(), &snapshot, &error)) << error;
    return snapshot.devices.empty() ? 0 : snapshot.devices[0].used_memory;
  }

  void StopAll() {
    for (auto& h : holders_) {
      const ProcessResult r = Stop(*h);
      EXPECT_EQ(r.exit_code, 0) << Describe(r);
    }
    holders_.clear();
  }

  std::vector<std::unique_ptr<Subprocess>> holders_;
};

uint64_t Sum(const std::vector<uint64_t>& values) {
  uint64_t sum = 0;
  for (uint64_t v : values) sum += v;
  return sum;
}

TEST_F(ShimConcurrencyTest, ProcessesAndThreadsOfOneTenantGetExactlyTheQuotaTogether) {
  // 4 processes x 4 threads x 8 chunks of 64 MiB = 8 GiB asked of a 1 GiB quota.
  std::vector<std::vector<std::string>> commands;
  for (const char* app : {"direct", "direct-ptsz", "dlsym", "direct"})
    commands.push_back({App(app), "alloc", "--chunk", "64Mi", "--count", "8", "--threads", "4"});
  const std::vector<uint64_t> held = Race(commands, {"GPUSLICE_TENANT=racers", "GPUSLICE_MEMORY_LIMIT=1Gi"});
  EXPECT_EQ(Sum(held), kGi);
  EXPECT_EQ(TenantUsed("racers"), kGi);
  EXPECT_EQ(DeviceMemoryInUse(), kGi) << "the device holds what the programs report";
  StopAll();
  EXPECT_EQ(TenantUsed("racers"), 0u);
}

TEST_F(ShimConcurrencyTest, ChunksThatDoNotDivideTheQuotaNeverOvershootIt) {
  // 96 MiB chunks: ten fit in 1 GiB (960 MiB), an eleventh would not.
  std::vector<std::vector<std::string>> commands(3, {App("direct"), "alloc", "--chunk", "96Mi", "--count", "6",
                                                     "--threads", "3"});
  const std::vector<uint64_t> held = Race(commands, {"GPUSLICE_TENANT=racers", "GPUSLICE_MEMORY_LIMIT=1Gi"});
  EXPECT_EQ(Sum(held), 10 * 96 * kMi);
  EXPECT_EQ(TenantUsed("racers"), 10 * 96 * kMi);
  StopAll();
}

TEST_F(ShimConcurrencyTest, DifferentAllocationFamiliesRacingShareTheQuotaExactly) {
  std::vector<std::vector<std::string>> commands;
  for (const char* api : {"alloc", "async", "vmm", "array", "pitch", "pool"})
    commands.push_back({App("direct"), api, "--chunk", "64Mi", "--count", "6", "--threads", "2"});
  const std::vector<uint64_t> held = Race(commands, {"GPUSLICE_TENANT=racers", "GPUSLICE_MEMORY_LIMIT=1Gi"});
  EXPECT_EQ(Sum(held), kGi);
  EXPECT_EQ(TenantUsed("racers"), kGi);
  StopAll();
}

TEST_F(ShimConcurrencyTest, RacingTenantsEachGetTheirOwnQuota) {
  std::vector<std::vector<std::string>> commands(2, {App("direct"), "alloc", "--chunk", "64Mi", "--count", "8",
                                                     "--threads", "4"});
  const std::string start_at = std::to_string(RealtimeMs() + 500);
  // Two tenants, two processes each, all racing at once.
  for (const char* tenant : {"red", "blue"}) {
    for (auto argv : commands) {
      argv.insert(argv.end(), {"--start-at", start_at, "--hold", "60"});
      holders_.push_back(StartShimmed(argv, {std::string("GPUSLICE_TENANT=") + tenant, "GPUSLICE_MEMORY_LIMIT=512Mi"}));
    }
  }
  uint64_t total = 0;
  for (auto& h : holders_) {
    ASSERT_TRUE(h->WaitForOutput("\"event\":\"holding\"", 30000)) << h->StdoutSoFar();
    total += EventOf(h->StdoutSoFar(), "holding").value("bytes_obtained", uint64_t{0});
  }
  EXPECT_EQ(total, kGi);
  EXPECT_EQ(TenantUsed("red"), 512 * kMi);
  EXPECT_EQ(TenantUsed("blue"), 512 * kMi);
  StopAll();
}

}  // namespace
}  // namespace gpuslice::testing
