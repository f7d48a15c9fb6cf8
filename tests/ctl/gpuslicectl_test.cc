// gpuslicectl run as operators run it, against a broker segment filled by real tenants' processes:
// forked children that charge the broker directly (exact figures, any number of tenants), and the
// workload program under the preloaded shim over the simulated driver (the whole path). Status
// shows each tenant's used / quota and its processes, in the table and the JSON alike, forgets a
// killed process's memory, and explains in one line why it has nothing to show; `options
// --markdown` is, byte for byte, docs/configuration.md's environment table.
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "broker/broker.h"
#include "broker/checked_index.h"
#include "broker/sched_terms.h"
#include "broker/scheduler.h"
#include "broker/segment_layout.h"
#include "broker/uuid.h"
#include "common/clock.h"
#include "common/version.h"
#include "tests/support/subprocess.h"
#include "tests/support/test_env.h"

namespace gpuslice::testing {
namespace {

using ::testing::ContainsRegex;
using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;
using Json = nlohmann::json;

constexpr uint64_t kMi = 1ULL << 20;
constexpr uint64_t kGi = 1ULL << 30;

std::string Ctl() { return BinDir() + "/gpuslicectl"; }
std::string Workload() { return BinDir() + "/gpuslice-workload"; }

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

bool IsOneLine(const std::string& text) { return !text.empty() && text.find('\n') == text.size() - 1; }

// A fresh empty directory under /tmp, removed (with what the test put there) on destruction.
class TempDir {
 public:
  TempDir() {
    char pattern[] = "/tmp/gpuslicectl-test-XXXXXX";
    path_ = mkdtemp(pattern);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }
  std::string state_file() const { return path_ + "/" + broker::kStateFileName; }

 private:
  std::string path_;
};

// The simulated GPU the broker-driven tenants use (the broker keys GPUs by UUID only).
constexpr uint8_t kUuid[16] = {0x5b, 0x1c, 0x36, 0xa2, 0x0f, 0x4d, 0x5e, 0x8a,
                               0x9c, 0x71, 0x2a, 0x3b, 0x4c, 0x5d, 0x6e, 0x7f};

// What a tenant process does on the compute side, as the shim's gate would at a first launch.
struct ComputeShare {
  uint32_t request_pct = 0;  // 0: SetShare is not called (the tenant has not launched)
  uint32_t limit_pct = 100;
  bool acquire = false;  // take the grant (and keep it: there is no monitor to hand it on)
  // > 0: pretend a 10 s window completed 3 s ago in which the tenant had this share (no test
  // waits 10 s for the scheduler to roll one).
  uint64_t share_ppm = 0;
};

// A process of `tenant` that charged `bytes` on kUuid through the broker and holds them until
// killed. A process registers once in its life, so every tenant process is a forked child.
class TenantProcess {
 public:
  TenantProcess(const std::string& state_dir, const std::string& tenant, uint64_t device_total, uint64_t quota,
                uint64_t bytes, const ComputeShare& compute = {}) {
    int ready[2];
    if (pipe(ready) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      close(ready[0]);
      std::string error;
      auto attached = broker::Broker::Attach(state_dir);
      std::unique_ptr<broker::Broker> broker = attached.ok() ? std::move(attached).value() : nullptr;
      char ok = '0';
      if (broker && broker->Register(tenant).ok()) {
        const Result<broker::LedgerId> ledger = broker->OpenLedger(kUuid, device_total, quota);
        if (ledger.ok() && (bytes == 0 || broker->Reserve(*ledger, bytes))) ok = '1';
        if (ok == '1' && compute.request_pct != 0) {
          // Lives until the process is killed.
          auto* gate = new broker::ComputeGate(broker.get(), *ledger, broker->slot().value());
          if (!gate->SetShare(compute.request_pct, compute.limit_pct, broker::ComputeClass::kStandard).ok()) ok = '0';
          if (ok == '1' && compute.acquire) gate->Acquire();
          if (ok == '1' && compute.share_ppm != 0) {
            broker::Segment* segment = broker->segment();
            broker::LedgerEntry& entry = At(*segment, *ledger);
            entry.window_service_ns.store(compute.share_ppm * 10'000);  // what a roll leaves behind
            entry.last_share_ppm.store(compute.share_ppm);
            At(*segment, ledger->gpu()).window_start_ns.store(MonotonicNanos() - 3'000'000'000ULL);
          }
        }
      }
      if (ok != '1') std::fprintf(stderr, "tenant %s: %s\n", tenant.c_str(), error.c_str());
      (void)!write(ready[1], &ok, 1);
      for (;;) pause();  // holds the charge (and the liveness lock) until killed
    }
    close(ready[1]);
    char ok = '0';
    if (pid_ > 0 && read(ready[0], &ok, 1) != 1) ok = '0';
    close(ready[0]);
    ready_ = ok == '1';
  }
  ~TenantProcess() { Kill(); }

  bool ready() const { return ready_; }
  pid_t pid() const { return pid_; }
  // SIGKILL: no orderly exit, so only the broker's reaping can return the charge.
  void Kill() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

 private:
  pid_t pid_ = -1;
  bool ready_ = false;
};

class GpuslicectlTest : public SimTest {
 protected:
  ProcessResult Status(std::vector<std::string> extra = {}) {
    std::vector<std::string> argv = {Ctl(), "status", "--state-dir", state_dir_.path()};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return gpuslice::testing::Run(argv);
  }

  Json StatusJson() {
    const ProcessResult r = Status({"--json"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return Json::parse(r.out);
  }

  // What the broker itself says about the state directory, as gpuslicectl passes it on.
  std::string BrokersRefusal() {
    Result<std::unique_ptr<broker::Broker>> attached = broker::Broker::AttachExisting(state_dir_.path());
    EXPECT_FALSE(attached.ok());
    std::string error = attached.message();
    if (error.starts_with("gpuslice: ")) error.erase(0, 10);
    return error + "\n";
  }

  std::unique_ptr<TenantProcess> Tenant(const std::string& name, uint64_t device_total, uint64_t quota, uint64_t bytes,
                                        const ComputeShare& compute = {}) {
    auto process = std::make_unique<TenantProcess>(state_dir_.path(), name, device_total, quota, bytes, compute);
    EXPECT_TRUE(process->ready()) << name;
    return process;
  }

  // A tenant's process under the shim holding `count` chunks of 256 MiB until killed; returns
  // once they are allocated.
  std::unique_ptr<Subprocess> Hold(const std::string& tenant, const std::string& limit, int count) {
    auto holder = std::make_unique<Subprocess>(
        std::vector<std::string>{Workload(), "memory", "--chunk", "256Mi", "--count", std::to_string(count), "--hold",
                                 "60", "--ready-line"},
        std::vector<std::string>{"LD_PRELOAD=" + ShimPath(), "LD_LIBRARY_PATH=" + SimLibDir(),
                                 "GPUSLICE_STATE_DIR=" + state_dir_.path(), "GPUSLICE_TENANT=" + tenant,
                                 "GPUSLICE_MEMORY_LIMIT=" + limit});
    EXPECT_TRUE(holder->WaitForOutput("\"event\":\"holding\"")) << holder->StdoutSoFar() << holder->Wait(1000).err;
    return holder;
  }

  ProcessResult Set(std::vector<std::string> args) {
    std::vector<std::string> argv = {Ctl(), "set", "--state-dir", state_dir_.path()};
    argv.insert(argv.end(), args.begin(), args.end());
    return gpuslice::testing::Run(argv);
  }

  TempDir state_dir_;
};

TEST_F(GpuslicectlTest, StatusOnAMissingStateDirectoryExplainsInOneLineAndExits1) {
  const ProcessResult r = gpuslice::testing::Run({Ctl(), "status", "--state-dir", state_dir_.path() + "/absent"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(IsOneLine(r.err)) << r.err;
  EXPECT_THAT(r.err, StartsWith("gpuslicectl: state directory " + state_dir_.path() + "/absent does not exist"));
  EXPECT_EQ(r.out, "");
}

TEST_F(GpuslicectlTest, StatusBeforeAnyTenantHasRunSaysSoAndExits1) {
  const ProcessResult r = Status();
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(IsOneLine(r.err)) << r.err;
  EXPECT_THAT(r.err, HasSubstr("no gpuslice tenant has run on this node yet"));
  EXPECT_FALSE(std::filesystem::exists(state_dir_.state_file())) << "status must never create the segment";
}

TEST_F(GpuslicectlTest, StatusReadsTheStateDirectoryFromTheEnvironmentByDefault) {
  const ProcessResult r =
      gpuslice::testing::Run({Ctl(), "status"}, {"GPUSLICE_STATE_DIR=" + state_dir_.path() + "/from-env"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr(state_dir_.path() + "/from-env does not exist"));
}

TEST_F(GpuslicectlTest, StatusOnACorruptSegmentPassesOnTheBrokersRefusalAndLeavesTheFileAlone) {
  const std::string garbage(64 * 1024, '\xA5');
  {
    std::ofstream out(state_dir_.state_file(), std::ios::binary);
    out << garbage;
  }
  chmod(state_dir_.state_file().c_str(), 0660);

  const ProcessResult r = Status();
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(IsOneLine(r.err)) << r.err;
  EXPECT_EQ(r.err, "gpuslicectl: " + BrokersRefusal());
  EXPECT_THAT(r.err, HasSubstr(state_dir_.state_file())) << "the broker's message names the file";
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(ReadFile(state_dir_.state_file()), garbage) << "status must never repair or replace a segment";
}

TEST_F(GpuslicectlTest, StatusOnASegmentOfAnotherLayoutVersionPassesOnTheBrokersRefusal) {
  Tenant("team-a", 4 * kGi, kGi, 0)->Kill();  // leaves the segment behind
  {
    std::fstream file(state_dir_.state_file(), std::ios::binary | std::ios::in | std::ios::out);
    const uint32_t future = broker::kLayoutVersion + 1;
    file.seekp(offsetof(broker::SegmentHeader, layout_version));
    file.write(reinterpret_cast<const char*>(&future), sizeof future);
  }
  const ProcessResult r = Status();
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(IsOneLine(r.err)) << r.err;
  EXPECT_EQ(r.err, "gpuslicectl: " + BrokersRefusal());
  EXPECT_EQ(r.out, "");
}

TEST_F(GpuslicectlTest, StatusTableShowsEachTenantItsUsageAgainstQuotaAndItsProcesses) {
  auto a1 = Tenant("team-a", 4 * kGi, kGi, 256 * kMi);
  auto a2 = Tenant("team-a", 4 * kGi, kGi, 256 * kMi);

  const ProcessResult r = Status();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, StartsWith("gpuslice state " + state_dir_.state_file() + " (layout " +
                                std::to_string(broker::kLayoutVersion) + ")\n"));
  EXPECT_THAT(r.out, HasSubstr("\nGPU " + broker::FormatUuid(kUuid) + "  4 GiB total\n"));
  EXPECT_THAT(r.out, ContainsRegex(
                         "\n  TENANT / PID +USED +MEM REQ +QUOTA +% QUOTA +BORROWED +REQUEST +LIMIT +CLASS +HELD\n"));
  // Processes in pid order.
  const pid_t first = std::min(a1->pid(), a2->pid());
  const pid_t second = std::max(a1->pid(), a2->pid());
  // No kernel launched yet: no compute request, limit or share.
  // Without a memory request every byte it holds is borrowed.
  EXPECT_THAT(r.out, ContainsRegex("\n  team-a +512 MiB +- +1 GiB +50.0% +512 MiB +- +- +- +-\n"
                                   "    pid " +
                                   std::to_string(first) +
                                   " +256 MiB\n"
                                   "    pid " +
                                   std::to_string(second) + " +256 MiB\n"));
  EXPECT_THAT(r.out, HasSubstr("\n  quota committed: 1 GiB of 4 GiB (25.0%)\n"
                               "  compute requested: none yet (1 tenant not launched yet)\n"));
}

TEST_F(GpuslicectlTest, StatusJsonShowsTheSameInBytes) {
  auto a = Tenant("team-a", 4 * kGi, kGi, 512 * kMi);

  const Json status = StatusJson();
  EXPECT_EQ(status["state_file"], state_dir_.state_file());
  EXPECT_EQ(status["layout_version"], broker::kLayoutVersion);
  ASSERT_EQ(status["gpus"].size(), 1u) << status.dump(2);
  const Json& gpu = status["gpus"][0];
  EXPECT_EQ(gpu["uuid"], broker::FormatUuid(kUuid));
  EXPECT_EQ(gpu["total_memory_bytes"], 4 * kGi);
  EXPECT_EQ(gpu["quota_committed_bytes"], kGi);
  EXPECT_EQ(gpu["unlimited_tenants"], 0);
  EXPECT_EQ(gpu["idle_tenants"], 0);
  EXPECT_EQ(gpu["oversubscribed"], false);
  ASSERT_EQ(gpu["tenants"].size(), 1u);
  const Json& tenant = gpu["tenants"][0];
  EXPECT_EQ(tenant["name"], "team-a");
  EXPECT_EQ(tenant["used_bytes"], 512 * kMi);
  EXPECT_EQ(tenant["quota_bytes"], kGi);
  EXPECT_DOUBLE_EQ(tenant["used_percent_of_quota"].get<double>(), 50.0);
  EXPECT_EQ(tenant["idle"], false);
  ASSERT_EQ(tenant["processes"].size(), 1u);
  EXPECT_EQ(tenant["processes"][0]["pid"], a->pid());
  EXPECT_EQ(tenant["processes"][0]["charged_bytes"], 512 * kMi);
}

TEST_F(GpuslicectlTest, StatusAfterTheHolderIsKilledShowsItsMemoryReturned) {
  auto a = Tenant("team-a", 4 * kGi, kGi, 512 * kMi);
  a->Kill();

  const Json status = StatusJson();
  ASSERT_EQ(status["gpus"].size(), 1u) << status.dump(2);
  ASSERT_EQ(status["gpus"][0]["tenants"].size(), 1u);
  const Json& tenant = status["gpus"][0]["tenants"][0];
  EXPECT_EQ(tenant["used_bytes"], 0u);
  EXPECT_EQ(tenant["processes"].size(), 0u) << "a dead process is not listed";
  EXPECT_EQ(tenant["idle"], true);
  EXPECT_EQ(status["gpus"][0]["idle_tenants"], 1);
  EXPECT_EQ(status["gpus"][0]["quota_committed_bytes"], 0u) << "an idle tenant promises nothing";

  const ProcessResult r = Status();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, ContainsRegex("\n  team-a +0 B +- +1 GiB +0.0% +- +- +- +- +-\n"));
  EXPECT_THAT(r.out, Not(HasSubstr("pid ")));
  EXPECT_THAT(r.out, HasSubstr("quota committed: 0 B of 4 GiB (0.0%); 1 idle tenant not counted\n"));
}

TEST_F(GpuslicectlTest, StatusFlagsQuotasThatAddUpToMoreThanTheDevice) {
  // Started in reverse order: the output is in name order regardless.
  auto b = Tenant("team-b", kGi, 768 * kMi, 256 * kMi);
  auto a = Tenant("team-a", kGi, 768 * kMi, 256 * kMi);

  const ProcessResult r = Status();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, ContainsRegex("\n  team-a +256 MiB +- +768 MiB +33.3% +256 MiB +- +- +- +-\n    pid " +
                                   std::to_string(a->pid()) +
                                   " +256 MiB\n  team-b +256 MiB +- +768 MiB +33.3% +256 MiB +- +- +- +-\n    pid " +
                                   std::to_string(b->pid()) + " +256 MiB\n"));
  EXPECT_THAT(r.out, HasSubstr("quota committed: 1.5 GiB of 1 GiB (150.0%) -- OVERSUBSCRIBED"));

  const Json gpu = StatusJson()["gpus"][0];
  EXPECT_EQ(gpu["tenants"][0]["name"], "team-a");
  EXPECT_EQ(gpu["quota_committed_bytes"], 1536 * kMi);
  EXPECT_EQ(gpu["oversubscribed"], true);
}

TEST_F(GpuslicectlTest, StatusShowsATenantWithoutAQuotaAsUnlimited) {
  auto a = Tenant("team-a", 4 * kGi, kGi, 256 * kMi);
  auto b = Tenant("team-b", 4 * kGi, broker::kUnlimited, 256 * kMi);

  const ProcessResult r = Status();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, ContainsRegex("\n  team-b +256 MiB +- +unlimited +- +256 MiB +- +- +- +-\n"));
  EXPECT_THAT(r.out, HasSubstr("quota committed: 1 GiB of 4 GiB (25.0%), plus 1 tenant without a quota -- "
                               "OVERSUBSCRIBED"));

  const Json gpu = StatusJson()["gpus"][0];
  EXPECT_EQ(gpu["unlimited_tenants"], 1);
  EXPECT_EQ(gpu["quota_committed_bytes"], kGi);
  EXPECT_EQ(gpu["tenants"][1]["name"], "team-b");
  EXPECT_TRUE(gpu["tenants"][1]["quota_bytes"].is_null());
  EXPECT_TRUE(gpu["tenants"][1]["used_percent_of_quota"].is_null());
}

TEST_F(GpuslicectlTest, StatusDoesNotCountTheQuotaOfIdleTenants) {
  // What a process without GPUSLICE_TENANT leaves behind: a tenant of its own, without a quota.
  Tenant("proc-0123456789abcdef", 4 * kGi, broker::kUnlimited, 256 * kMi)->Kill();
  auto a = Tenant("team-a", 4 * kGi, kGi, 256 * kMi);

  const ProcessResult r = Status();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // Shown as idle: a row beneath it says it has no process.
  EXPECT_THAT(r.out, ContainsRegex(
                         "\n  proc-0123456789abcdef +0 B +- +unlimited +- +- +- +- +- +-\n    no process\n  team-a "));
  EXPECT_THAT(r.out, HasSubstr("\n  quota committed: 1 GiB of 4 GiB (25.0%); 1 idle tenant not counted\n"));

  const Json gpu = StatusJson()["gpus"][0];
  EXPECT_EQ(gpu["unlimited_tenants"], 0);
  EXPECT_EQ(gpu["idle_tenants"], 1);
  EXPECT_EQ(gpu["oversubscribed"], false);
}

TEST_F(GpuslicectlTest, StatusShowsAWorkloadUnderTheShimAndForgetsItWhenKilled) {
  SetEnv("GPUSLICE_SIM_MEMORY", "4Gi");
  auto holder = Hold("team-a", "1Gi", 2);

  const ProcessResult r = Status();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, ContainsRegex("\nGPU GPU-[0-9a-f-]+  4 GiB total\n"));
  EXPECT_THAT(r.out, ContainsRegex("\n  team-a +512 MiB +- +1 GiB +50.0% +512 MiB[^\n]*\n    pid " +
                                   std::to_string(holder->pid()) + " +512 MiB\n"));
  const Json tenant = StatusJson()["gpus"][0]["tenants"][0];
  EXPECT_EQ(tenant["used_bytes"], 512 * kMi);
  EXPECT_EQ(tenant["quota_bytes"], kGi);
  ASSERT_EQ(tenant["processes"].size(), 1u);
  EXPECT_EQ(tenant["processes"][0]["pid"], holder->pid());

  holder->Kill(SIGKILL);
  holder->Wait();
  const Json after = StatusJson()["gpus"][0]["tenants"][0];
  EXPECT_EQ(after["used_bytes"], 0u);
  EXPECT_EQ(after["processes"].size(), 0u);
}

// --- compute policy (gpuslicectl set) and compute shares in the status ---

TEST_F(GpuslicectlTest, SetRefusesBadValuesWithOneLineUsageErrorsAndChangesNothing) {
  auto a = Tenant("team-a", 4 * kGi, kGi, 0);
  const std::string uuid = broker::FormatUuid(kUuid);
  struct Case {
    std::vector<std::string> args;
    std::string says;
  };
  const std::vector<Case> cases = {
      {{"--quantum", "20ms"}, "set needs --gpu: a GPU's UUID as `gpuslicectl status` prints it, or all"},
      {{"--gpu", "all"}, "set changes nothing without --quantum, --mode or --budget"},
      {{"--gpu", "all", "--mode", "fair"}, "--mode 'fair' is not a sharing mode: use timeslice"},
      {{"--gpu", "all", "--mode", "Timeslice"}, "--mode 'Timeslice' is not a sharing mode"},
      {{"--gpu", "all", "--quantum", "10"}, "--quantum '10' is not a duration: give a number and a unit"},
      {{"--gpu", "all", "--quantum", "fast"}, "--quantum 'fast' is not a duration"},
      {{"--gpu", "all", "--quantum", "-5ms"}, "--quantum '-5ms' is not a duration"},
      {{"--gpu", "all", "--quantum", "10 min"}, "--quantum '10 min' is not a duration"},
      {{"--gpu", "all", "--quantum", "1e3us"}, "--quantum '1e3us' is not a duration"},
      {{"--gpu", "all", "--quantum", ""}, "--quantum '' is not a duration"},
      {{"--gpu", "all", "--quantum", "500us"},
       "--quantum 500us is out of range: a quantum is 1ms to 1s, or default (10 ms)"},
      {{"--gpu", "all", "--quantum", "0.9ms"}, "--quantum 0.9ms is out of range"},
      {{"--gpu", "all", "--quantum", "1.5s"}, "--quantum 1.5s is out of range"},
      {{"--gpu", "all", "--quantum", "0ms"}, "--quantum 0ms is out of range"},
      {{"--gpu", "all", "--quantum", "99999999999999999999999s"}, "is not a duration"},
      {{"--gpu", "GPU-123", "--mode", "none"}, "--gpu 'GPU-123' is not a GPU UUID"},
      {{"--gpu", uuid.substr(4), "--mode", "none"}, "is not a GPU UUID: give one as `gpuslicectl status` prints it"},
  };
  for (const Case& c : cases) {
    const ProcessResult r = Set(c.args);
    const std::string what = ::testing::PrintToString(c.args);
    EXPECT_EQ(r.exit_code, 2) << what << r.err;
    EXPECT_TRUE(IsOneLine(r.err)) << what << r.err;
    EXPECT_THAT(r.err, StartsWith("gpuslicectl: ")) << what;
    EXPECT_THAT(r.err, HasSubstr(c.says)) << what;
    EXPECT_EQ(r.out, "") << what;
  }
  const Json gpu = StatusJson()["gpus"][0];
  EXPECT_EQ(gpu["mode"], "timeslice");
  EXPECT_EQ(gpu["quantum_default"], true) << "a refused set must not change anything";
}

TEST_F(GpuslicectlTest, SetOnAnUnknownGpuOrAMissingStateExplainsInOneLineAndExits1) {
  const ProcessResult missing = gpuslice::testing::Run(
      {Ctl(), "set", "--state-dir", state_dir_.path() + "/absent", "--gpu", "all", "--quantum", "20ms"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_TRUE(IsOneLine(missing.err)) << missing.err;
  EXPECT_THAT(missing.err, StartsWith("gpuslicectl: state directory " + state_dir_.path() + "/absent does not exist"));

  const ProcessResult no_state = Set({"--gpu", "all", "--mode", "none"});
  EXPECT_EQ(no_state.exit_code, 1);
  EXPECT_THAT(no_state.err, HasSubstr("no gpuslice tenant has run on this node yet"));
  EXPECT_FALSE(std::filesystem::exists(state_dir_.state_file())) << "set must never create the segment";

  auto a = Tenant("team-a", 4 * kGi, kGi, 0);
  const std::string other = "GPU-00000000-0000-0000-0000-000000000001";
  const ProcessResult unknown = Set({"--gpu", other, "--quantum", "20ms"});
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_TRUE(IsOneLine(unknown.err)) << unknown.err;
  EXPECT_EQ(unknown.err, "gpuslicectl: no GPU " + other + " in " + state_dir_.state_file() +
                             ": a GPU appears there once a tenant has used it (gpuslicectl status lists them)\n");
  EXPECT_EQ(unknown.out, "");
}

TEST_F(GpuslicectlTest, SetOnASegmentItCannotWriteExplainsAndExits1) {
  auto a = Tenant("team-a", 4 * kGi, kGi, 0);
  std::vector<std::string> argv = {Ctl(), "set", "--state-dir", state_dir_.path(), "--gpu", "all", "--quantum", "20ms"};
  if (geteuid() == 0) {
    // Root may write any file: run the tool as nobody, who may read the file but not write it.
    constexpr char kSetpriv[] = "/usr/bin/setpriv";
    if (access(kSetpriv, X_OK) != 0) GTEST_SKIP() << "running as root without " << kSetpriv << " to drop privileges";
    argv.insert(argv.begin(), {kSetpriv, "--reuid=65534", "--regid=65534", "--clear-groups"});
    ASSERT_EQ(chmod(state_dir_.path().c_str(), 0755), 0);
    ASSERT_EQ(chmod(state_dir_.state_file().c_str(), 0444), 0);
  } else {
    ASSERT_EQ(chmod(state_dir_.state_file().c_str(), 0440), 0);
  }
  const ProcessResult r = gpuslice::testing::Run(argv);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(IsOneLine(r.err)) << r.err;
  EXPECT_THAT(r.err, HasSubstr("cannot change the policy: no write permission on " + state_dir_.state_file()));
}

// "Permission denied" alone leaves an operator guessing: the line names the directory that
// denies, its owner, group and mode, the caller's uid and groups, and the fix.
TEST_F(GpuslicectlTest, StatusWithoutPermissionNamesTheDirectoryItsOwnerItsModeTheCallerAndTheFix) {
  auto a = Tenant("team-a", 4 * kGi, kGi, 0);
  std::vector<std::string> argv = {Ctl(), "status", "--state-dir", state_dir_.path()};
  std::string caller = std::to_string(geteuid());
  std::string expected;
  if (geteuid() == 0) {
    // Root enters any directory: run the tool as nobody, outside the directory's group.
    constexpr char kSetpriv[] = "/usr/bin/setpriv";
    if (access(kSetpriv, X_OK) != 0) GTEST_SKIP() << "running as root without " << kSetpriv << " to drop privileges";
    argv.insert(argv.begin(), {kSetpriv, "--reuid=65534", "--regid=65534", "--clear-groups"});
    ASSERT_EQ(chmod(state_dir_.path().c_str(), 0770), 0);
    expected = "permission denied: " + state_dir_.path() + " is owned by uid 0, group root (gid 0), mode 0770, and " +
               "uid 65534 (groups nogroup (gid 65534)) may not enter it: run as a member of group root (gid 0) " +
               "(systemd: SupplementaryGroups=; " +
               "Kubernetes: securityContext.supplementalGroups), or prepare the state directory for a group shared " +
               "by every tenant and reader (chgrp GROUP DIR && chmod 2770 DIR;";
  } else {
    ASSERT_EQ(chmod(state_dir_.state_file().c_str(), 0), 0);
    expected = "permission denied: " + state_dir_.state_file() + " is owned by uid " + caller + ", group ";
  }
  const ProcessResult r = gpuslice::testing::Run(argv);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(IsOneLine(r.err)) << r.err;
  EXPECT_THAT(r.err, HasSubstr("gpuslicectl: cannot open state file " + state_dir_.state_file() + ": " + expected));
}

// A state file created before its directory was prepared for a shared group keeps the group it
// was created with: the fix is to chgrp the file, which the line says (it said "run as a member of
// group 0", and named groups by number only).
TEST_F(GpuslicectlTest, StatusDeniedByAStateFileOfAnOldGroupSaysToChgrpIt) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root, to prepare a directory for another group";
  constexpr char kSetpriv[] = "/usr/bin/setpriv";
  if (access(kSetpriv, X_OK) != 0) GTEST_SKIP() << kSetpriv << " is not installed";
  auto a = Tenant("team-a", 4 * kGi, kGi, 0);  // the file: root's group, 0660
  // Prepared afterwards, as docs/broker.md says: the readers' group (nogroup here), setgid.
  ASSERT_EQ(chown(state_dir_.path().c_str(), 0, 65534), 0);
  ASSERT_EQ(chmod(state_dir_.path().c_str(), 02770), 0);
  const ProcessResult r = gpuslice::testing::Run({kSetpriv, "--reuid=65534", "--regid=65534", "--clear-groups", Ctl(),
                                                  "status", "--state-dir", state_dir_.path()});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(IsOneLine(r.err)) << r.err;
  EXPECT_THAT(r.err, HasSubstr(state_dir_.state_file() + " is owned by uid 0, group root (gid 0), mode 0660"));
  EXPECT_THAT(r.err, HasSubstr("the file keeps the group it was created with, not its directory's (nogroup (gid "
                               "65534)): chgrp 65534 " +
                               state_dir_.state_file() + " && chmod 0660 " + state_dir_.state_file()));
  // The fix works.
  ASSERT_EQ(chown(state_dir_.state_file().c_str(), 0, 65534), 0);
  const ProcessResult fixed = gpuslice::testing::Run({kSetpriv, "--reuid=65534", "--regid=65534", "--clear-groups",
                                                      Ctl(), "status", "--state-dir", state_dir_.path()});
  EXPECT_EQ(fixed.exit_code, 0) << fixed.err;
}

TEST_F(GpuslicectlTest, SetThenStatusShowsTheNewModeAndQuantum) {
  auto a = Tenant("team-a", 4 * kGi, kGi, 0);
  const std::string uuid = broker::FormatUuid(kUuid);

  Json gpu = StatusJson()["gpus"][0];
  EXPECT_EQ(gpu["mode"], "timeslice");
  EXPECT_EQ(gpu["quantum_ns"], broker::kDefaultQuantumNs);
  EXPECT_EQ(gpu["quantum_default"], true);
  ProcessResult r = Status();
  EXPECT_THAT(r.out,
              HasSubstr("\n  compute: timeslice, quantum 10 ms (default), budget 2 ms (default); idle; 0 grants\n"));

  r = Set({"--gpu", uuid, "--quantum", "20ms", "--mode", "none"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out,
            "GPU " + uuid +
                ": mode timeslice -> none, quantum 10 ms (default) -> 20 ms, budget 2 ms (default) (unchanged)\n");
  EXPECT_EQ(r.err, "");
  gpu = StatusJson()["gpus"][0];
  EXPECT_EQ(gpu["mode"], "none");
  EXPECT_EQ(gpu["quantum_ns"], 20'000'000u);
  EXPECT_EQ(gpu["quantum_default"], false);
  r = Status();
  EXPECT_THAT(
      r.out,
      HasSubstr(
          "\n  compute: none (memory quotas only: launches are not gated), quantum 20 ms, budget 2 ms (default)\n"));
  EXPECT_THAT(r.out, HasSubstr("\n  HELD: not measured (launches are not gated)\n"));

  // Only what is given changes; every spelling of a duration is taken.
  r = Set({"--gpu", "all", "--quantum", "0.05s"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out,
            "GPU " + uuid + ": mode none (unchanged), quantum 20 ms -> 50 ms, budget 2 ms (default) (unchanged)\n");
  r = Set({"--gpu", "all", "--quantum", "2500us", "--mode", "mps"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "GPU " + uuid + ": mode none -> mps, quantum 50 ms -> 2.5 ms, budget 2 ms (default) (unchanged)\n");
  gpu = StatusJson()["gpus"][0];
  EXPECT_EQ(gpu["mode"], "mps");
  EXPECT_EQ(gpu["quantum_ns"], 2'500'000u);
  for (const auto& [text, ns] : std::vector<std::pair<std::string, uint64_t>>{{"1ms", 1'000'000},
                                                                              {"1s", 1'000'000'000},
                                                                              {"1000000ns", 1'000'000},
                                                                              {"7 ms", 7'000'000},
                                                                              {"0.0125s", 12'500'000},
                                                                              {"15\u00b5s", 0}}) {
    r = Set({"--gpu", "all", "--quantum", text});
    if (ns == 0) {  // 15 µs parses, and is out of range
      EXPECT_EQ(r.exit_code, 2) << text;
      EXPECT_THAT(r.err, HasSubstr("out of range")) << text;
      continue;
    }
    ASSERT_EQ(r.exit_code, 0) << text << ": " << r.err;
    EXPECT_EQ(StatusJson()["gpus"][0]["quantum_ns"], ns) << text;
  }

  r = Set({"--gpu", "all", "--quantum", "default", "--mode", "timeslice"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out,
            "GPU " + uuid +
                ": mode mps -> timeslice, quantum 12.5 ms -> 10 ms (default), budget 2 ms (default) (unchanged)\n");
  gpu = StatusJson()["gpus"][0];
  EXPECT_EQ(gpu["mode"], "timeslice");
  EXPECT_EQ(gpu["quantum_ns"], broker::kDefaultQuantumNs);

  // The queued-work budget: set, shown, back to the default; out of range refused.
  r = Set({"--gpu", "all", "--budget", "500us"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out,
            "GPU " + uuid +
                ": mode timeslice (unchanged), quantum 10 ms (default) (unchanged), budget 2 ms (default) -> 500 us\n");
  EXPECT_EQ(StatusJson()["gpus"][0]["budget_ns"], 500'000u);
  EXPECT_EQ(StatusJson()["gpus"][0]["budget_default"], false);
  r = Set({"--gpu", "all", "--budget", "1s"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--budget 1s is out of range: a budget is 100us to 100ms"));
  r = Set({"--gpu", "all", "--budget", "default"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(StatusJson()["gpus"][0]["budget_ns"], broker::kDefaultBudgetNs);
  EXPECT_EQ(gpu["quantum_default"], true);
  r = Set({"--gpu", "all", "--mode", "timeslice"});
  EXPECT_EQ(
      r.out,
      "GPU " + uuid +
          ": mode timeslice (unchanged), quantum 10 ms (default) (unchanged), budget 2 ms (default) (unchanged)\n");
}

TEST_F(GpuslicectlTest, StatusShowsTheHolderAndSetModeNoneEndsTheGrant) {
  auto a = Tenant("team-a", 4 * kGi, kGi, 0, {.request_pct = 30, .limit_pct = 100, .acquire = true});

  ProcessResult r = Status();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out,
              HasSubstr(
                  "\n  compute: timeslice, quantum 10 ms (default), budget 2 ms (default); held by team-a; 1 grant\n"));
  Json gpu = StatusJson()["gpus"][0];
  EXPECT_EQ(gpu["holder"], "team-a");
  EXPECT_EQ(gpu["grants"], 1);
  EXPECT_EQ(gpu["closing"], false);
  EXPECT_EQ(gpu["waiting_processes"], 0);

  r = Set({"--gpu", "all", "--mode", "none"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  gpu = StatusJson()["gpus"][0];
  EXPECT_TRUE(gpu["holder"].is_null()) << "launches are no longer gated: nobody holds the GPU";
  EXPECT_EQ(gpu["mode"], "none");
}

TEST_F(GpuslicectlTest, StatusShowsEachTenantsComputeRequestAndLimit) {
  auto a = Tenant("team-a", 4 * kGi, kGi, 256 * kMi, {.request_pct = 30, .limit_pct = 80});
  auto b = Tenant("team-b", 4 * kGi, kGi, 0, {.request_pct = 50, .limit_pct = 100});
  auto c = Tenant("team-c", 4 * kGi, kGi, 0);  // has not launched: no request yet

  const ProcessResult r = Status();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, ContainsRegex("\n  team-a +256 MiB +- +1 GiB +25.0% +256 MiB +30% +80% +standard +-\n"));
  EXPECT_THAT(r.out, ContainsRegex("\n  team-b +0 B +- +1 GiB +0.0% +- +50% +100% +standard +-\n"));
  EXPECT_THAT(r.out, ContainsRegex("\n  team-c +0 B +- +1 GiB +0.0% +- +- +- +- +-\n"));
  EXPECT_THAT(r.out, HasSubstr("\n  compute requested: 80% by 2 tenants (1 more not launched yet)\n"));
  EXPECT_THAT(r.out, HasSubstr("\n  HELD: - until a first window of taking turns (10 s or more) completes\n"));
  EXPECT_THAT(r.out, Not(HasSubstr("oversubscribed")));

  const Json gpu = StatusJson()["gpus"][0];
  EXPECT_EQ(gpu["compute_requested_percent"], 80);
  EXPECT_EQ(gpu["compute_unset_tenants"], 1);
  EXPECT_EQ(gpu["compute_oversubscribed"], false);
  EXPECT_TRUE(gpu["share_window_ended_seconds_ago"].is_null());
  ASSERT_EQ(gpu["tenants"].size(), 3u);
  EXPECT_EQ(gpu["tenants"][0]["compute_request_percent"], 30);
  EXPECT_EQ(gpu["tenants"][0]["compute_limit_percent"], 80);
  EXPECT_TRUE(gpu["tenants"][0]["last_window_share_percent"].is_null());
  EXPECT_EQ(gpu["tenants"][1]["compute_request_percent"], 50);
  EXPECT_EQ(gpu["tenants"][1]["compute_limit_percent"], 100);
  EXPECT_TRUE(gpu["tenants"][2]["compute_request_percent"].is_null());
  EXPECT_TRUE(gpu["tenants"][2]["compute_limit_percent"].is_null());
}

// A tenant's request, limit and class show as soon as its first process uses the GPU, before
// any kernel launch (they showed "-" until the first launch).
TEST_F(GpuslicectlTest, StatusShowsARequestBeforeTheFirstLaunch) {
  Subprocess holder({Workload(), "memory", "--chunk", "256Mi", "--count", "1", "--hold", "60", "--ready-line"},
                    {"LD_PRELOAD=" + ShimPath(), "LD_LIBRARY_PATH=" + SimLibDir(),
                     "GPUSLICE_STATE_DIR=" + state_dir_.path(), "GPUSLICE_TENANT=team-a", "GPUSLICE_MEMORY_LIMIT=1Gi",
                     "GPUSLICE_COMPUTE_REQUEST=30", "GPUSLICE_COMPUTE_LIMIT=50", "GPUSLICE_COMPUTE_CLASS=latency"});
  ASSERT_TRUE(holder.WaitForOutput("\"event\":\"holding\"")) << holder.StdoutSoFar() << holder.StderrSoFar();
  const ProcessResult r = Status();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, ContainsRegex("\n  team-a +256 MiB +- +1 GiB +25.0% +256 MiB +30% +50% +latency +-\n"));
  EXPECT_THAT(r.out, HasSubstr("\n  compute requested: 30% by 1 tenant\n"));
  holder.Kill(SIGTERM);
  holder.Wait(30000);
}

TEST_F(GpuslicectlTest, StatusSaysWhenTheActiveTenantsRequestMoreThanTheGpu) {
  auto a = Tenant("team-a", 4 * kGi, kGi, 0, {.request_pct = 60});
  auto b = Tenant("team-b", 4 * kGi, kGi, 0, {.request_pct = 70});
  // A dead tenant's request no longer counts.
  Tenant("team-c", 4 * kGi, kGi, 0, {.request_pct = 90})->Kill();

  ProcessResult r = Status();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("\n  compute requested: 130% by 2 tenants -- oversubscribed: requests are shared in "
                               "proportion\n"));
  Json gpu = StatusJson()["gpus"][0];
  EXPECT_EQ(gpu["compute_requested_percent"], 130);
  EXPECT_EQ(gpu["compute_oversubscribed"], true);

  b->Kill();
  r = Status();
  EXPECT_THAT(r.out, HasSubstr("\n  compute requested: 60% by 1 tenant\n"));
  EXPECT_EQ(StatusJson()["gpus"][0]["compute_oversubscribed"], false);
}

TEST_F(GpuslicectlTest, StatusShowsTheShareOfTheLastCompleteWindow) {
  auto a = Tenant("team-a", 4 * kGi, kGi, 0, {.request_pct = 60, .limit_pct = 100, .share_ppm = 552'000});
  auto b = Tenant("team-b", 4 * kGi, kGi, 0, {.request_pct = 40});

  ProcessResult r = Status();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, ContainsRegex("\n  team-a +0 B +- +1 GiB +0.0% +- +60% +100% +standard +55.2%\n"));
  EXPECT_THAT(r.out, ContainsRegex("\n  team-b +0 B +- +1 GiB +0.0% +- +40% +100% +standard +0.0%\n"))
      << "a tenant that got nothing in a measured window has a share of 0, not '-'";
  EXPECT_THAT(r.out,
              ContainsRegex("\n  HELD: time each tenant held the GPU \\(its turns, drain included\\) in the last "
                            "complete window \\(hand-over to hand-over, 10 s or more\\), which ended [0-9]+\\.[0-9] s "
                            "ago\n"));
  Json gpu = StatusJson()["gpus"][0];
  EXPECT_GE(gpu["share_window_ended_seconds_ago"].get<double>(), 3.0);
  EXPECT_NEAR(gpu["tenants"][0]["last_window_share_percent"].get<double>(), 55.2, 1e-9);
  EXPECT_EQ(gpu["tenants"][1]["last_window_share_percent"], 0.0);

  // Not gated, not measured: the last figure would be stale.
  ASSERT_EQ(Set({"--gpu", "all", "--mode", "mps"}).exit_code, 0);
  gpu = StatusJson()["gpus"][0];
  EXPECT_TRUE(gpu["tenants"][0]["last_window_share_percent"].is_null());
  EXPECT_THAT(Status().out, ContainsRegex("\n  team-a +0 B +- +1 GiB +0.0% +- +60% +100% +standard +-\n"));
}

TEST_F(GpuslicectlTest, EveryGpuslicectlCommandTheReadmeShowsExists) {
  const std::string readme = ReadFile(SourceDir() + "/README.md");
  std::vector<std::string> commands;
  for (size_t at = readme.find("gpuslicectl "); at != std::string::npos; at = readme.find("gpuslicectl ", at + 1)) {
    size_t end = at + 12;
    while (end < readme.size() && std::islower(static_cast<unsigned char>(readme[end]))) ++end;
    if (end > at + 12) commands.push_back(readme.substr(at + 12, end - at - 12));
  }
  EXPECT_THAT(commands, ::testing::Contains("status"));
  EXPECT_THAT(commands, ::testing::Contains("set")) << "README's \"Using it\" shows gpuslicectl set";
  for (const std::string& command : commands) {
    EXPECT_EQ(gpuslice::testing::Run({Ctl(), command, "--help"}).exit_code, 0) << "gpuslicectl " << command;
  }
}

TEST_F(GpuslicectlTest, OptionsMarkdownIsExactlyTheManualsEnvironmentReference) {
  const ProcessResult r = gpuslice::testing::Run({Ctl(), "options", "--markdown"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, StartsWith("| variable | type | default | meaning |\n|---|---|---|---|\n"));
  for (const char* name : {"GPUSLICE_MEMORY_LIMIT", "GPUSLICE_TENANT", "GPUSLICE_STATE_DIR"}) {
    EXPECT_THAT(r.out, HasSubstr("| `" + std::string(name) + "` |"));
  }

  const std::string page = ReadFile(SourceDir() + "/docs/configuration.md");
  const size_t begin = page.find("\n## Environment reference\n");
  ASSERT_NE(begin, std::string::npos) << "docs/configuration.md lost its environment reference";
  const size_t end = page.find("\n## ", begin + 1);
  const std::string section = page.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
  EXPECT_THAT(section, HasSubstr("\n" + r.out))
      << "docs/configuration.md's environment table differs from the shim's option table; regenerate it with\n"
         "  build/bin/gpuslicectl options --markdown\n"
         "and paste it over the table in the \"Environment reference\" section.";
}

TEST_F(GpuslicectlTest, OptionsListsEveryVariableWithItsDefault) {
  const ProcessResult r = gpuslice::testing::Run({Ctl(), "options"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(
      r.out,
      StartsWith(
          "GPUSLICE_MEMORY_LIMIT\n    type: quantity above 0 or percentage 1% to 100%\n    default: GPUSLICE_MEMORY_REQUEST, else "
          "unlimited\n"));
  EXPECT_THAT(r.out, HasSubstr("GPUSLICE_STATE_DIR\n"));
  EXPECT_THAT(r.out, HasSubstr("    default: /run/gpuslice\n"));
}

TEST_F(GpuslicectlTest, HelpExplainsEveryColumnOfTheStatus) {
  const ProcessResult r = gpuslice::testing::Run({Ctl(), "status", "--help"});
  EXPECT_EQ(r.exit_code, 0);
  for (const char* column :
       {"TENANT / PID", "USED", "QUOTA", "% QUOTA", "OVERSUBSCRIBED", "--json", "--state-dir", "REQUEST", "LIMIT",
        "HELD", "(default)", "GPUSLICE_COMPUTE_REQUEST", "GPUSLICE_COMPUTE_LIMIT",
        "oversubscribed: requests are shared in proportion", "accounted here:", "UNACCOUNTED", "unaccounted_bytes"}) {
    EXPECT_THAT(r.out, HasSubstr(column));
  }
  const ProcessResult set = gpuslice::testing::Run({Ctl(), "set", "--help"});
  EXPECT_EQ(set.exit_code, 0);
  for (const char* text : {"--gpu", "UUID|all", "--quantum", "--mode", "--state-dir", "timeslice", "none", "mps",
                           "default", "1ms to 1s", "10ms", "Exit status"}) {
    EXPECT_THAT(set.out, HasSubstr(text));
  }
  const ProcessResult top = gpuslice::testing::Run({Ctl(), "--help"});
  EXPECT_EQ(top.exit_code, 0);
  for (const char* command : {"status", "set", "options", "top"}) EXPECT_THAT(top.out, HasSubstr(command));
  const ProcessResult top_help = gpuslice::testing::Run({Ctl(), "top", "--help"});
  EXPECT_EQ(top_help.exit_code, 0);
  for (const char* text : {"--once", "--interval", "--state-dir", "MEMORY", "HELD", "WAIT P99", "REFUSED", "PROCS"}) {
    EXPECT_THAT(top_help.out, HasSubstr(text));
  }
  const ProcessResult options = gpuslice::testing::Run({Ctl(), "options", "--help"});
  EXPECT_EQ(options.exit_code, 0);
  EXPECT_THAT(options.out, HasSubstr("--markdown"));
}

// A tenant name is whatever bytes a process wrote into the segment (the broker takes any 1 to 63
// bytes): printed raw, one could clear the operator's terminal and forge a row of figures. Every
// byte outside printable ASCII is shown as \xNN, in the table and the JSON alike.
TEST_F(GpuslicectlTest, StatusPrintsANameWithEscapesAndNewlinesAsOneInertLine) {
  auto a = Tenant("evil\x1b[2J\n  forged  0 B  1 GiB\xff", 4 * kGi, kGi, 256 * kMi);
  const ProcessResult r = Status();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find('\x1b'), std::string::npos) << "no escape reaches the terminal";
  EXPECT_THAT(r.out, Not(HasSubstr("\n  forged"))) << "no row is forged";
  EXPECT_THAT(r.out, HasSubstr("evil\\x1b[2J\\x0a  forged  0 B  1 GiB\\xff"));
  const Json json = StatusJson();
  EXPECT_EQ(json["gpus"][0]["tenants"][0]["name"], "evil\\x1b[2J\\x0a  forged  0 B  1 GiB\\xff");
}

TEST_F(GpuslicectlTest, StatusShowsAGpuWhoseHolderHasNoProcessLeftAsIdle) {
  auto a = Tenant("team-a", 4 * kGi, kGi, 0, {.request_pct = 30, .limit_pct = 100, .acquire = true});
  auto b = Tenant("team-b", 4 * kGi, kGi, 0, {.request_pct = 30});
  ASSERT_THAT(Status().out, HasSubstr("; held by team-a; 1 grant\n"));

  a->Kill();  // the grant stays in the segment until someone else asks for the GPU
  const ProcessResult r = Status();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out,
              HasSubstr("\n  compute: timeslice, quantum 10 ms (default), budget 2 ms (default); idle; 1 grant\n"));
  EXPECT_THAT(r.out, Not(HasSubstr("held by team-a")));
  EXPECT_TRUE(StatusJson()["gpus"][0]["holder"].is_null());
}

// A state directory mounted read-only (a node-wide view for operators): the help promises the
// figures as they stand, not a failure. Needs a mount namespace of its own (unshare -rm).
TEST_F(GpuslicectlTest, StatusOnAReadOnlyMountShowsTheFiguresAsTheyStand) {
  if (gpuslice::testing::Run({"/usr/bin/unshare", "-rm", "true"}).exit_code != 0)
    GTEST_SKIP() << "no user and mount namespaces here (unshare -rm)";
  auto a = Tenant("team-a", 4 * kGi, kGi, 256 * kMi);
  const std::string dir = state_dir_.path();
  const ProcessResult r = gpuslice::testing::Run(
      {"/usr/bin/unshare", "-rm", "sh", "-c",
       "mount --bind \"$0\" \"$0\" && mount -o remount,ro,bind \"$0\" && touch \"$0/probe\" 2>/dev/null; "
       "[ ! -e \"$0/probe\" ] || exit 99; exec \"$1\" status --state-dir \"$0\"",
       dir, Ctl()});
  EXPECT_NE(r.exit_code, 99) << "the bind mount did not become read-only";
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, ContainsRegex("\n  team-a +256 MiB +- +1 GiB +25.0% +256 MiB"));
}

TEST_F(GpuslicectlTest, AMisspeltSubcommandIsNamedWithTheNearestOne) {
  ProcessResult r = gpuslice::testing::Run({Ctl(), "statu"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, StartsWith("gpuslicectl: unknown subcommand 'statu' (did you mean status?); the subcommands are "
                                "status, set, options, top, plan\n"));
  EXPECT_THAT(r.err, Not(HasSubstr("A subcommand is required")));
  r = gpuslice::testing::Run({Ctl(), "optoins", "--markdown"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("did you mean options?"));
  r = gpuslice::testing::Run({Ctl(), "frobnicate"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, StartsWith("gpuslicectl: unknown subcommand 'frobnicate'; the subcommands are"));
}

TEST_F(GpuslicectlTest, VersionPrintsTheProjectsVersion) {
  const ProcessResult r = gpuslice::testing::Run({Ctl(), "--version"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, std::string("gpuslicectl ") + GPUSLICE_VERSION + "\n");
}

TEST_F(GpuslicectlTest, UsageErrorsExit2) {
  EXPECT_EQ(gpuslice::testing::Run({Ctl()}).exit_code, 2);
  EXPECT_EQ(gpuslice::testing::Run({Ctl(), "status", "--no-such-flag"}).exit_code, 2);
  EXPECT_EQ(gpuslice::testing::Run({Ctl(), "frobnicate"}).exit_code, 2);
  EXPECT_EQ(gpuslice::testing::Run({Ctl(), "status", "--state-dir"}).exit_code, 2);
  EXPECT_EQ(gpuslice::testing::Run({Ctl(), "set", "--gpu"}).exit_code, 2);
  EXPECT_EQ(gpuslice::testing::Run({Ctl(), "set", "--gpu", "all", "--quantum", "10ms", "extra"}).exit_code, 2);
}

}  // namespace
}  // namespace gpuslice::testing
