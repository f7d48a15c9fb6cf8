// Liveness across PID namespaces: a process in its own PID namespace (as in a container) is PID 1
// there, a number that means another process here. Its liveness is its lock on the state file,
// which the kernel drops at its death whatever the namespace: it is never reaped while alive, and
// its charge comes back once it is killed.
#include <signal.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "broker/broker.h"
#include "broker/snapshot.h"
#include "broker/uuid.h"
#include "tests/support/broker_test_names.h"
#include "tests/support/subprocess.h"
#include "tests/support/test_env.h"

namespace gpuslice::broker {
namespace {

std::string FindUnshare() {
  for (const char* path : {"/usr/bin/unshare", "/bin/unshare", "/usr/sbin/unshare", "/sbin/unshare"}) {
    if (access(path, X_OK) == 0) return path;
  }
  return "";
}

// The first child of `pid` (unshare's forked child), from /proc; 0 when unknown.
pid_t FirstChildOf(pid_t pid) {
  std::ifstream children("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children");
  pid_t child = 0;
  children >> child;
  return child;
}

TEST(BrokerPidNamespaceTest, ProcessInAnotherPidNamespaceIsLiveUntilKilledThenReaped) {
  const std::string unshare = FindUnshare();
  if (unshare.empty()) GTEST_SKIP() << "the unshare program (util-linux) is not installed";
  const auto probe = ::gpuslice::testing::Run({unshare, "--pid", "--fork", "true"});
  if (probe.exit_code != 0) {
    GTEST_SKIP() << "unshare --pid is not permitted here (needs root or user namespaces): " << probe.err;
  }
  BrokerTempDir dir;
  const std::string client = ::gpuslice::testing::BinDir() + "/gpuslice-broker-test-client";
  ::gpuslice::testing::Subprocess contained(
      {unshare, "--pid", "--fork", "--kill-child", client, "--state", dir.state_dir(), "--tenant", "boxed", "--uuid",
       FormatUuid(kTestUuid), "--total", std::to_string(kTestGpuTotal), "--quota", std::to_string(100 * kMiB),
       "--reserve", std::to_string(60 * kMiB), "--hold"});
  ASSERT_TRUE(contained.WaitForOutput("ready ")) << contained.Wait(1000).err;
  EXPECT_NE(contained.StdoutSoFar().find("ready pid=1 "), std::string::npos)
      << "the client runs as PID 1 of its own namespace: " << contained.StdoutSoFar();

  std::string error;
  auto survivor = ValueOf(Broker::Attach(dir.state_dir()));
  ASSERT_TRUE(survivor);
  ASSERT_TRUE(IsOk(survivor->Register("boxed")));
  const Result<LedgerId> ledger_or = survivor->OpenLedger(kTestUuid, kTestGpuTotal, 100 * kMiB);
  ASSERT_TRUE(IsOk(ledger_or));
  const LedgerId ledger = *ledger_or;
  EXPECT_FALSE(survivor->Reserve(ledger, 50 * kMiB)) << "the contained process is alive: nothing is reaped";
  EXPECT_EQ(survivor->Used(ledger), 60 * kMiB);
  Result<Snapshot> taken = TakeSnapshot(dir.state_dir());
  ASSERT_TRUE(taken.ok()) << taken.message();
  Snapshot snapshot = taken.ok() ? std::move(taken).value() : Snapshot();
  ASSERT_EQ(snapshot.gpus.size(), 1u);
  ASSERT_EQ(snapshot.gpus[0].tenants.size(), 1u);
  bool listed = false;
  for (const ProcessView& process : snapshot.gpus[0].tenants[0].processes) {
    listed |= process.pid == 1 && process.charged == 60 * kMiB;
  }
  EXPECT_TRUE(listed) << "the snapshot lists the process as it sees itself (PID 1)";

  // SIGKILL the client itself (its PID here is not 1), not just unshare.
  const pid_t inner = FirstChildOf(contained.pid());
  ASSERT_EQ(kill(inner > 0 ? inner : contained.pid(), SIGKILL), 0);
  const auto killed = std::chrono::steady_clock::now();
  bool granted = false;
  while (!granted && SecondsSince(killed) < 1.0) {
    granted = survivor->Reserve(ledger, 50 * kMiB);
    if (!granted) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_TRUE(granted) << "the contained process's 60 MiB did not come back within 1 s of its death";
  EXPECT_EQ(survivor->Used(ledger), 50 * kMiB);
  contained.Kill(SIGKILL);
  contained.Wait(5000);
}

}  // namespace
}  // namespace gpuslice::broker
