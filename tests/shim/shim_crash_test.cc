// A process can die at any instant — SIGKILL by the OOM killer or `kubectl delete`, in the middle
// of the shim's reserve/allocate/commit or free/credit — and its tenant loses nothing: what it
// held is available to the tenant's other processes within a second, no lock stays held, and
// after hundreds of such deaths the ledger is exact (used == 0 once everyone is gone). Liveness
// is not judged by PID, so a process in another PID namespace is handled the same way.
#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gpuslice/sim_query.h"
#include "tests/support/shim_fixture.h"

namespace gpuslice::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

const std::vector<std::string> kTeam = {"GPUSLICE_TENANT=team", "GPUSLICE_MEMORY_LIMIT=1Gi"};

class ShimCrashTest : public ShimTest {
 protected:
  // After a holder of the whole quota died: how long until another process of the tenant gets
  // all of it. Polls with fresh processes (each one asks once), gives up after `bound`.
  steady_clock::duration TimeUntilTheQuotaIsFree(steady_clock::time_point killed, milliseconds bound) {
    while (true) {
      const ProcessResult r = RunShimmed({App("direct"), "alloc", "--chunk", "256Mi", "--count", "4"}, kTeam);
      EXPECT_EQ(r.exit_code, 0) << Describe(r);
      if (ResultOf(r).value("allocated", -1) == 4) return steady_clock::now() - killed;
      if (steady_clock::now() - killed > bound) return steady_clock::duration::max();
      std::this_thread::sleep_for(milliseconds(5));
    }
  }

  // Device memory the simulated device counts as held by live processes.
  uint64_t DeviceMemoryInUse() const {
    simquery::Snapshot snapshot;
    std::string error;
    EXPECT_TRUE(simquery::TakeSnapshot(state_path(), &snapshot, &error)) << error;
    return snapshot.devices.empty() ? 0 : snapshot.devices[0].used_memory;
  }
};

TEST_F(ShimCrashTest, ChargesOfAKilledProcessAreAvailableToTheTenantWithinOneSecond) {
  auto holder = StartHolder({App("direct"), "alloc", "--chunk", "256Mi", "--count", "4"}, kTeam);
  ASSERT_EQ(TenantUsed("team"), kGi);
  holder->Kill(SIGKILL);
  const ProcessResult killed = holder->Wait();
  ASSERT_EQ(killed.signal, SIGKILL);
  const auto took = TimeUntilTheQuotaIsFree(steady_clock::now(), milliseconds(1000));
  EXPECT_LE(took, milliseconds(1000)) << "the dead process's 1 GiB was not returned within a second";
  EXPECT_EQ(TenantUsed("team"), 0u);
}

TEST_F(ShimCrashTest, AKilledProcessWithManyThreadsReleasesEverything) {
  auto holder = StartHolder({App("dlsym"), "vmm", "--chunk", "32Mi", "--count", "8", "--threads", "4"}, kTeam);
  ASSERT_EQ(TenantUsed("team"), kGi);
  holder->Kill(SIGKILL);
  holder->Wait();
  EXPECT_LE(TimeUntilTheQuotaIsFree(steady_clock::now(), milliseconds(1000)), milliseconds(1000));
}

// Hundreds of processes allocating and freeing (several families, several threads, contending
// for one quota) are SIGKILLed at random moments — during start-up, inside the shim's critical
// sections, between calls. Afterwards the ledger holds exactly nothing and the whole quota can
// be allocated again, so nothing leaked and no lock was left held.
TEST_F(ShimCrashTest, HundredsOfRandomKillsLeaveTheLedgerExact) {
  constexpr int kKills = 240;
  constexpr int kAtOnce = 4;
  const char* apis[] = {"alloc", "async", "vmm", "pitch", "array", "pool", "managed"};
  const char* apps[] = {"direct", "direct-ptsz", "dlsym"};
  std::mt19937 random(12345);
  // The simulated GPU's state file is created by the first process that uses it; one killed while
  // creating it leaves a file the simulator refuses ever after (a limit of the simulator, which a
  // real GPU does not share; seen once in CI as "bad magic"): it is created before the kills.
  ASSERT_EQ(RunShimmed({App("direct"), "alloc", "--chunk", "1Mi", "--count", "1"}, kTeam, 20000).exit_code, 0);
  const auto started = steady_clock::now();
  int kills = 0;
  int killed_while_churning = 0;
  while (kills < kKills) {
    std::vector<std::unique_ptr<Subprocess>> batch;
    std::vector<milliseconds> delays;
    for (int i = 0; i < kAtOnce; ++i) {
      const std::string api = apis[random() % std::size(apis)];
      const std::string app = apps[random() % std::size(apps)];
      batch.push_back(
          StartShimmed({App(app), api, "--churn", "--chunk", "64Mi", "--count", "6", "--threads", "2"}, kTeam));
      delays.push_back(milliseconds(random() % 21));
    }
    // Half the batches are killed counting from their start (many die while starting up), half
    // counting from the moment they began churning (they die mid-allocation or mid-free).
    const bool from_churn = (kills / kAtOnce) % 2 == 1;
    for (int i = 0; i < kAtOnce; ++i) {
      if (from_churn && batch[i]->WaitForOutput("\"event\":\"churning\"", 10000)) ++killed_while_churning;
      std::this_thread::sleep_for(delays[i]);
      batch[i]->Kill(SIGKILL);
    }
    for (auto& p : batch) {
      const ProcessResult r = p->Wait(10000);
      EXPECT_TRUE(r.signal == SIGKILL || r.exit_code == 0) << Describe(r);
      ++kills;
    }
  }
  EXPECT_GE(killed_while_churning, kKills / 2 - kAtOnce) << "most kills should land inside the churn";
  EXPECT_EQ(TenantUsed("team"), 0u) << "a dead process's charge leaked";
  const ProcessResult after = RunShimmed({App("direct"), "alloc", "--chunk", "256Mi", "--count", "5"}, kTeam, 10000);
  ASSERT_EQ(after.exit_code, 0) << Describe(after);
  EXPECT_EQ(ResultOf(after).value("allocated", -1), 4) << after.out;
  EXPECT_EQ(DeviceMemoryInUse(), 0u);
  EXPECT_LT(steady_clock::now() - started, std::chrono::seconds(60));
}

// The host PID of the only child of `parent` (the program unshare started), or 0.
pid_t OnlyChildOf(pid_t parent) {
  std::ifstream children("/proc/" + std::to_string(parent) + "/task/" + std::to_string(parent) + "/children");
  pid_t child = 0;
  children >> child;
  return child;
}

// `unshare --pid --fork` as this machine allows it: as root, else in a new user namespace.
// Empty (and `why` says why) when neither works.
std::vector<std::string> UnsharePidNamespace(std::string* why) {
  for (std::vector<std::string> prefix :
       {std::vector<std::string>{"unshare", "--pid", "--fork", "--kill-child"},
        std::vector<std::string>{"unshare", "--user", "--map-root-user", "--pid", "--fork", "--kill-child"}}) {
    std::vector<std::string> probe = {"/usr/bin/env"};
    probe.insert(probe.end(), prefix.begin(), prefix.end());
    probe.insert(probe.end(), {"/bin/sh", "-c", "echo $$"});
    const ProcessResult r = gpuslice::testing::Run(probe);
    if (r.exit_code == 0 && r.out == "1\n") {
      prefix.insert(prefix.begin(), "/usr/bin/env");
#ifdef GPUSLICE_SANITIZER_BUILD
      // The preloaded shim brings the sanitizer runtime into unshare too, and at unshare's exit
      // LeakSanitizer cannot start its tracer (a process of the namespace, whose init is gone):
      // no leak check in unshare itself, the inherited options again for the program.
      const char* options = std::getenv("ASAN_OPTIONS");
      const std::string inherited = options ? options : "";
      prefix.insert(prefix.begin() + 1, "ASAN_OPTIONS=" + inherited + ":detect_leaks=0");
      prefix.insert(prefix.end(), {"/usr/bin/env", "ASAN_OPTIONS=" + inherited});
#endif
      return prefix;
    }
    *why = "unshare is unavailable or not permitted here: " + r.err;
  }
  return {};
}

TEST_F(ShimCrashTest, KilledProcessInAnotherPidNamespaceReturnsItsCharges) {
  std::string why;
  std::vector<std::string> argv = UnsharePidNamespace(&why);
  if (argv.empty()) GTEST_SKIP() << why;
  for (const std::string& a : {App("direct"), std::string("alloc"), std::string("--chunk"), std::string("256Mi"),
                               std::string("--count"), std::string("4")})
    argv.push_back(a);
  auto holder = StartHolder(argv, kTeam);
  const Json holding = EventOf(holder->StdoutSoFar(), "holding");
  EXPECT_EQ(holding.value("pid", 0), 1) << "the program should be PID 1 of its own namespace";
  ASSERT_EQ(TenantUsed("team"), kGi);

  const pid_t program = OnlyChildOf(holder->pid());
  ASSERT_GT(program, 0) << "cannot find the program's host PID";
  ASSERT_EQ(kill(program, SIGKILL), 0);
  holder->Wait(10000);
  EXPECT_LE(TimeUntilTheQuotaIsFree(steady_clock::now(), milliseconds(1000)), milliseconds(1000));
  EXPECT_EQ(TenantUsed("team"), 0u);
}

TEST_F(ShimCrashTest, ProcessesInTwoPidNamespacesWithTheSamePidAreTwoProcesses) {
  // Both are PID 1, each in its own namespace: one dying must not return the other's charges.
  std::string why;
  const std::vector<std::string> prefix = UnsharePidNamespace(&why);
  if (prefix.empty()) GTEST_SKIP() << why;
  auto command = [&](const char* count) {
    std::vector<std::string> argv = prefix;
    argv.insert(argv.end(), {App("direct"), "alloc", "--chunk", "256Mi", "--count", count});
    return argv;
  };
  auto first = StartHolder(command("1"), kTeam);
  auto second = StartHolder(command("2"), kTeam);
  ASSERT_EQ(TenantUsed("team"), 768 * kMi);
  ASSERT_EQ(kill(OnlyChildOf(first->pid()), SIGKILL), 0);
  first->Wait(10000);
  EXPECT_TRUE(Eventually([&] { return TenantUsed("team") == 512 * kMi; }, milliseconds(1000)))
      << "used " << TenantUsed("team");
  // unshare does not pass SIGTERM on: end the hold of the program itself.
  ASSERT_EQ(kill(OnlyChildOf(second->pid()), SIGTERM), 0);
  const ProcessResult r = second->Wait(10000);
  EXPECT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_EQ(TenantUsed("team"), 0u);
}

}  // namespace
}  // namespace gpuslice::testing
