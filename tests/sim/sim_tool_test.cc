// The gpuslice-sim command: status as text and JSON agrees with the query API's ground truth,
// reset is refused while a tenant lives, and a missing or foreign state file is one clear error.
#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "gpuslice/sim_query.h"
#include "sim/sim_state.h"
#include "tests/support/subprocess.h"
#include "tests/support/test_env.h"

namespace gpuslice::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string Tool() { return BinDir() + "/gpuslice-sim"; }
std::string Workload() { return BinDir() + "/gpuslice-workload"; }
std::vector<std::string> WorkloadEnv() { return {"LD_LIBRARY_PATH=" + SimLibDir()}; }

// (Inside a fixture the name Run is testing::Test's.)
ProcessResult Exec(std::vector<std::string> argv, std::vector<std::string> env = {}) {
  return gpuslice::testing::Run(std::move(argv), std::move(env));
}

// Waits for `text` on the child's stdout; a failure shows what the child printed instead.
::testing::AssertionResult Reached(Subprocess& child, const std::string& text) {
  if (child.WaitForOutput(text, 60000)) return ::testing::AssertionSuccess();
  const ProcessResult r = child.Wait(5000);
  return ::testing::AssertionFailure() << "the child never printed " << text << "; exit code " << r.exit_code
                                       << ", stdout: " << r.out << ", stderr: " << r.err;
}

bool FileExists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

// One line, newline-terminated.
void ExpectOneLine(const std::string& text) {
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(text.find('\n'), text.size() - 1) << "expected one line, got: " << text;
}

class SimToolTest : public SimTest {
 protected:
  // A tenant in this process: registered, holding `memory` on device 0, with some busy time.
  std::unique_ptr<sim::SimState> AddTenant(uint64_t memory, uint64_t busy_ns, uint64_t kernels, int* slot) {
    std::string error;
    auto state = sim::SimState::OpenOrCreate(&error);
    EXPECT_NE(state, nullptr) << error;
    if (!state) return nullptr;
    const std::optional<int> registered = state->RegisterProcess();
    if (!registered) {
      ADD_FAILURE() << "no free process slot";
      return nullptr;
    }
    *slot = *registered;
    EXPECT_TRUE(state->ChargeMemory(0, *slot, memory));
    auto& stats = state->device(0).processes[*slot];
    stats.contexts.fetch_add(1);
    stats.busy_ns.fetch_add(busy_ns);
    stats.kernels.fetch_add(kernels);
    state->device(0).busy_ns.fetch_add(busy_ns);
    return state;
  }
};

TEST_F(SimToolTest, StatusWithoutAStateFileIsOneClearError) {
  const ProcessResult r = Exec({Tool(), "status"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, "");
  ExpectOneLine(r.err);
  EXPECT_THAT(r.err, HasSubstr(state_path()));
  EXPECT_THAT(r.err, HasSubstr("no simulated GPU state"));
  EXPECT_EQ(Exec({Tool(), "status", "--json"}).exit_code, 1);
  EXPECT_FALSE(FileExists(state_path())) << "status must not create the devices";
}

TEST_F(SimToolTest, StatusRefusesAnIncompatibleStateFile) {
  {
    std::ofstream garbage(state_path(), std::ios::binary);
    garbage << std::string(4096, 'x');
  }
  const ProcessResult r = Exec({Tool(), "status"});
  EXPECT_EQ(r.exit_code, 1);
  ExpectOneLine(r.err);
  EXPECT_THAT(r.err, HasSubstr(state_path()));
}

TEST_F(SimToolTest, StatusTextShowsDevicesAndProcesses) {
  SetEnv("GPUSLICE_SIM_DEVICES", "2");
  int slot = -1;
  auto tenant = AddTenant(300ULL << 20, 250'000'000, 7, &slot);
  ASSERT_TRUE(tenant);
  simquery::Snapshot snap;
  std::string error;
  ASSERT_TRUE(simquery::TakeSnapshot(state_path(), &snap, &error)) << error;

  const ProcessResult r = Exec({Tool(), "status"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  for (const auto& device : snap.devices) {
    EXPECT_THAT(r.out, HasSubstr("GPU " + std::to_string(device.ordinal) + "  " + device.name + "  " + device.uuid));
  }
  EXPECT_THAT(r.out, HasSubstr("memory 300MiB / 81920MiB"));
  EXPECT_THAT(r.out, HasSubstr("busy 250.0 ms"));
  EXPECT_THAT(r.out, HasSubstr("hand-overs 0"));
  EXPECT_THAT(r.out, HasSubstr("no processes"));  // the second device
  // The process row: slot, pid, state, command, memory, busy ms, kernels, share.
  EXPECT_THAT(r.out, ::testing::ContainsRegex(std::to_string(slot) + " +" + std::to_string(getpid()) +
                                              " +live +sim_tool_test +300MiB +250\\.0 +7 +100\\.0%"));
}

TEST_F(SimToolTest, StatusJsonAgreesWithTheQueryApi) {
  int slot = -1;
  auto tenant = AddTenant(64ULL << 20, 40'000'000, 3, &slot);
  ASSERT_TRUE(tenant);
  const ProcessResult r = Exec({Tool(), "status", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  simquery::Snapshot snap;
  std::string error;
  ASSERT_TRUE(simquery::TakeSnapshot(state_path(), &snap, &error)) << error;

  EXPECT_EQ(doc["state_path"], state_path());
  ASSERT_EQ(doc["devices"].size(), 1u);
  const auto& device = doc["devices"][0];
  EXPECT_EQ(device["name"], snap.devices[0].name);
  EXPECT_EQ(device["uuid"], snap.devices[0].uuid);
  EXPECT_EQ(device["total_memory"], snap.devices[0].total_memory);
  EXPECT_EQ(device["used_memory"], 64ULL << 20);
  EXPECT_EQ(device["free_memory"], snap.devices[0].total_memory - (64ULL << 20));
  EXPECT_EQ(device["busy_ns"], 40'000'000u);
  EXPECT_EQ(device["running_slot"], -1);
  ASSERT_EQ(device["processes"].size(), 1u);
  const auto& process = device["processes"][0];
  EXPECT_EQ(process["slot"], slot);
  EXPECT_EQ(process["pid"], getpid());
  EXPECT_EQ(process["live"], true);
  EXPECT_EQ(process["command"], "sim_tool_test");
  EXPECT_EQ(process["memory_used"], 64ULL << 20);
  EXPECT_EQ(process["busy_ns"], 40'000'000u);
  EXPECT_EQ(process["kernels"], 3u);
  EXPECT_DOUBLE_EQ(process["share"].get<double>(), 1.0);
}

TEST_F(SimToolTest, StatusShowsAFinishedWorkloadsShare) {
  const ProcessResult workload = Exec({Workload(), "compute", "--duration", "1", "--kernel-us", "2000"}, WorkloadEnv());
  ASSERT_EQ(workload.exit_code, 0) << workload.err;
  const ProcessResult r = Exec({Tool(), "status", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  const auto& device = doc["devices"][0];
  ASSERT_EQ(device["processes"].size(), 1u);
  const auto& process = device["processes"][0];
  EXPECT_EQ(process["live"], false);
  EXPECT_EQ(process["memory_used"], 0u);
  EXPECT_GT(process["kernels"].get<uint64_t>(), 0u);
  EXPECT_GT(process["busy_ns"].get<uint64_t>(), 0u);
  EXPECT_GT(device["busy_ns"].get<uint64_t>(), 0u);
  EXPECT_NEAR(process["share"].get<double>(), 1.0, 0.01);  // it was alone on the device
  const ProcessResult text = Exec({Tool(), "status"});
  EXPECT_THAT(text.out, HasSubstr("exited"));
}

TEST_F(SimToolTest, ResetIsRefusedWhileAProcessLivesAndWorksAfterItIsKilled) {
  Subprocess child({Workload(), "memory", "--chunk", "16Mi", "--count", "1", "--hold", "60", "--ready-line"},
                   WorkloadEnv());
  ASSERT_TRUE(Reached(child, "\"event\":\"holding\""));

  const ProcessResult refused = Exec({Tool(), "reset"});
  EXPECT_EQ(refused.exit_code, 1);
  ExpectOneLine(refused.err);
  EXPECT_THAT(refused.err, HasSubstr("live process " + std::to_string(child.pid())));
  EXPECT_TRUE(FileExists(state_path()));

  child.Kill(SIGKILL);
  child.Wait();
  const ProcessResult reset = Exec({Tool(), "reset"});
  EXPECT_EQ(reset.exit_code, 0) << reset.err;
  EXPECT_THAT(reset.out, HasSubstr("removed " + state_path()));
  EXPECT_FALSE(FileExists(state_path()));
  EXPECT_EQ(Exec({Tool(), "status"}).exit_code, 1);
  // Nothing left to remove is not an error.
  EXPECT_EQ(Exec({Tool(), "reset"}).exit_code, 0);
}

TEST_F(SimToolTest, StateOptionOverridesTheEnvironment) {
  int slot = -1;
  auto tenant = AddTenant(1ULL << 20, 0, 0, &slot);
  ASSERT_TRUE(tenant);
  const std::string other = state_path() + ".other";
  for (const auto& args : {std::vector<std::string>{Tool(), "--state", other, "status"},
                           std::vector<std::string>{Tool(), "status", "--state", other}}) {
    const ProcessResult r = Exec(args);
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_THAT(r.err, HasSubstr(other));
  }
  const ProcessResult r = Exec({Tool(), "status", "--state", state_path()}, {"GPUSLICE_SIM_STATE=" + other});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr(state_path()));
}

TEST_F(SimToolTest, HelpDescribesEveryCommandAndOption) {
  const ProcessResult help = Exec({Tool(), "--help"});
  EXPECT_EQ(help.exit_code, 0);
  for (const char* word : {"status", "reset", "--state", "--json", "GPUSLICE_SIM_STATE", "Exit status"})
    EXPECT_THAT(help.out, HasSubstr(word));
  const ProcessResult status_help = Exec({Tool(), "status", "--help"});
  EXPECT_EQ(status_help.exit_code, 0);
  EXPECT_THAT(status_help.out, HasSubstr("--json"));
}

TEST_F(SimToolTest, BadUsageExitsWithTwo) {
  EXPECT_EQ(Exec({Tool()}).exit_code, 2);
  EXPECT_EQ(Exec({Tool(), "status", "--no-such-flag"}).exit_code, 2);
  const ProcessResult r = Exec({Tool(), "frobnicate"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.out + r.err, Not(HasSubstr("Simulated GPUs")));
}

}  // namespace
}  // namespace gpuslice::testing
