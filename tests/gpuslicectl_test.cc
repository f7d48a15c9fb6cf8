// gpuslicectl run as operators run it, against a broker segment filled by real tenants' processes:
// forked children that charge the broker directly (exact figures, any number of tenants), and the
// workload program under the preloaded shim over the simulated driver (the whole path). Status
// shows each tenant's used / quota and its processes, in the table and the JSON alike, forgets a
// killed process's memory, and explains in one line why it has nothing to show; `options
// --markdown` is, byte for byte, the README's environment table.
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "broker/broker.h"
#include "broker/segment_layout.h"
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

// A process of `tenant` that charged `bytes` on kUuid through the broker and holds them until
// killed. A process registers once in its life, so every tenant process is a forked child.
class TenantProcess {
 public:
  TenantProcess(const std::string& state_dir, const std::string& tenant, uint64_t device_total, uint64_t quota,
                uint64_t bytes) {
    int ready[2];
    if (pipe(ready) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      close(ready[0]);
      std::string error;
      auto broker = broker::Broker::Attach(state_dir, &error);
      char ok = '0';
      if (broker && broker->Register(tenant, &error)) {
        const int ledger = broker->OpenLedger(kUuid, device_total, quota, &error);
        if (ledger >= 0 && (bytes == 0 || broker->Reserve(ledger, bytes))) ok = '1';
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
    std::string error;
    EXPECT_EQ(broker::Broker::AttachExisting(state_dir_.path(), &error), nullptr);
    if (error.starts_with("gpuslice: ")) error.erase(0, 10);
    return error + "\n";
  }

  std::unique_ptr<TenantProcess> Tenant(const std::string& name, uint64_t device_total, uint64_t quota,
                                        uint64_t bytes) {
    auto process = std::make_unique<TenantProcess>(state_dir_.path(), name, device_total, quota, bytes);
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
    EXPECT_TRUE(holder->WaitForOutput("\"event\":\"holding\""))
        << holder->StdoutSoFar() << holder->Wait(1000).err;
    return holder;
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
  EXPECT_THAT(r.out, ContainsRegex("\n  TENANT / PID +USED +QUOTA +% QUOTA\n"));
  // Processes in pid order.
  const pid_t first = std::min(a1->pid(), a2->pid());
  const pid_t second = std::max(a1->pid(), a2->pid());
  EXPECT_THAT(r.out, ContainsRegex("\n  team-a +512 MiB +1 GiB +50.0%\n"
                                   "    pid " + std::to_string(first) + " +256 MiB\n"
                                   "    pid " + std::to_string(second) + " +256 MiB\n"));
  EXPECT_THAT(r.out, EndsWith("\n  quota committed: 1 GiB of 4 GiB (25.0%)\n"));
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
  EXPECT_THAT(r.out, ContainsRegex("\n  team-a +0 B +1 GiB +0.0%\n"));
  EXPECT_THAT(r.out, Not(HasSubstr("pid ")));
  EXPECT_THAT(r.out, HasSubstr("quota committed: 0 B of 4 GiB (0.0%); 1 idle tenant not counted\n"));
}

TEST_F(GpuslicectlTest, StatusFlagsQuotasThatAddUpToMoreThanTheDevice) {
  // Started in reverse order: the output is in name order regardless.
  auto b = Tenant("team-b", kGi, 768 * kMi, 256 * kMi);
  auto a = Tenant("team-a", kGi, 768 * kMi, 256 * kMi);

  const ProcessResult r = Status();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, ContainsRegex("\n  team-a +256 MiB +768 MiB +33.3%\n    pid " + std::to_string(a->pid()) +
                                   " +256 MiB\n  team-b +256 MiB +768 MiB +33.3%\n    pid " +
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
  EXPECT_THAT(r.out, ContainsRegex("\n  team-b +256 MiB +unlimited +-\n"));
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
  EXPECT_THAT(r.out, ContainsRegex("\n  proc-0123456789abcdef +0 B +unlimited +-\n  team-a "));
  EXPECT_THAT(r.out, EndsWith("\n  quota committed: 1 GiB of 4 GiB (25.0%); 1 idle tenant not counted\n"));

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
  EXPECT_THAT(r.out, ContainsRegex("\n  team-a +512 MiB +1 GiB +50.0%\n    pid " + std::to_string(holder->pid()) +
                                   " +512 MiB\n"));
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

TEST_F(GpuslicectlTest, OptionsMarkdownIsExactlyTheReadmesEnvironmentReference) {
  const ProcessResult r = gpuslice::testing::Run({Ctl(), "options", "--markdown"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, StartsWith("| variable | type | default | meaning |\n|---|---|---|---|\n"));
  for (const char* name : {"GPUSLICE_MEMORY_LIMIT", "GPUSLICE_TENANT", "GPUSLICE_STATE_DIR"}) {
    EXPECT_THAT(r.out, HasSubstr("| `" + std::string(name) + "` |"));
  }

  const std::string readme = ReadFile(SourceDir() + "/README.md");
  const size_t begin = readme.find("\n## Environment reference\n");
  ASSERT_NE(begin, std::string::npos) << "README.md lost its environment reference";
  const size_t end = readme.find("\n## ", begin + 1);
  const std::string section = readme.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
  EXPECT_THAT(section, HasSubstr("\n" + r.out))
      << "README.md's environment table differs from the shim's option table; regenerate it with\n"
         "  build/bin/gpuslicectl options --markdown\n"
         "and paste it over the table in the \"Environment reference\" section.";
}

TEST_F(GpuslicectlTest, OptionsListsEveryVariableWithItsDefault) {
  const ProcessResult r = gpuslice::testing::Run({Ctl(), "options"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, StartsWith("GPUSLICE_MEMORY_LIMIT\n    type: quantity or percentage\n    default: unlimited\n"));
  EXPECT_THAT(r.out, HasSubstr("GPUSLICE_STATE_DIR\n"));
  EXPECT_THAT(r.out, HasSubstr("    default: /run/gpuslice\n"));
}

TEST_F(GpuslicectlTest, HelpExplainsEveryColumnOfTheStatus) {
  const ProcessResult r = gpuslice::testing::Run({Ctl(), "status", "--help"});
  EXPECT_EQ(r.exit_code, 0);
  for (const char* column : {"TENANT / PID", "USED", "QUOTA", "% QUOTA", "OVERSUBSCRIBED", "--json", "--state-dir"}) {
    EXPECT_THAT(r.out, HasSubstr(column));
  }
  const ProcessResult options = gpuslice::testing::Run({Ctl(), "options", "--help"});
  EXPECT_EQ(options.exit_code, 0);
  EXPECT_THAT(options.out, HasSubstr("--markdown"));
}

TEST_F(GpuslicectlTest, UsageErrorsExit2) {
  EXPECT_EQ(gpuslice::testing::Run({Ctl()}).exit_code, 2);
  EXPECT_EQ(gpuslice::testing::Run({Ctl(), "status", "--no-such-flag"}).exit_code, 2);
  EXPECT_EQ(gpuslice::testing::Run({Ctl(), "frobnicate"}).exit_code, 2);
  EXPECT_EQ(gpuslice::testing::Run({Ctl(), "status", "--state-dir"}).exit_code, 2);
}

}  // namespace
}  // namespace gpuslice::testing
