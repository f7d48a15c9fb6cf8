// Running programs under the real LD_PRELOAD=libgpuslice.so over the simulated driver, for the
// shim_*_test.cc suites. Every child gets the shim, the simulated libcuda on its library path
// and a state directory of its own test (never /run/gpuslice); the test programs are
// tests/apps/ (gpuslice-test-direct, -direct-ptsz, -dlsym) and gpuslice-workload.
#pragma once

#include <dirent.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "broker/snapshot.h"
#include "tests/support/subprocess.h"
#include "tests/support/test_env.h"

namespace gpuslice::testing {

using Json = nlohmann::json;

inline constexpr uint64_t kMi = 1ULL << 20;
inline constexpr uint64_t kGi = 1ULL << 30;

// The test programs by short name: "direct", "direct-ptsz", "dlsym"; "workload".
inline std::string App(const std::string& name) {
  return name == "workload" ? BinDir() + "/gpuslice-workload" : BinDir() + "/gpuslice-test-" + name;
}

// A way of reaching the driver, and how to ask a program that uses it for `api` allocations.
struct DriverPath {
  std::string name;                // for test names
  std::string app;                 // App() name
  std::vector<std::string> flags;  // after the api

  std::vector<std::string> Command(const std::string& api, const std::vector<std::string>& args) const {
    std::vector<std::string> argv = {App(app)};
    if (app == "workload") {
      argv.insert(argv.end(), {"memory", "--api", api});
    } else {
      argv.push_back(api);
    }
    argv.insert(argv.end(), flags.begin(), flags.end());
    argv.insert(argv.end(), args.begin(), args.end());
    return argv;
  }
};

inline std::ostream& operator<<(std::ostream& os, const DriverPath& p) { return os << p.name; }

inline const DriverPath kDirect{"DirectLink", "direct", {}};
inline const DriverPath kDirectPtsz{"DirectLinkPerThread", "direct-ptsz", {}};
inline const DriverPath kDlsymHandle{"DlsymOnHandle", "dlsym", {"--lookup", "handle"}};
inline const DriverPath kDlsymHandlePtsz{"DlsymOnHandlePerThread", "dlsym", {"--lookup", "handle", "--per-thread"}};
inline const DriverPath kDlsymDefault{"DlsymDefault", "dlsym", {"--lookup", "default"}};
inline const DriverPath kProcAddress{"CuGetProcAddress", "dlsym", {"--lookup", "procaddress"}};
inline const DriverPath kProcAddressPtsz{"CuGetProcAddressPerThread",
                                         "dlsym",
                                         {"--lookup", "procaddress", "--per-thread"}};
inline const DriverPath kWorkload{"Workload", "workload", {}};

// Every stdout line that is a JSON object.
inline std::vector<Json> JsonLines(const std::string& out) {
  std::vector<Json> lines;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    Json j = Json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_object()) lines.push_back(std::move(j));
  }
  return lines;
}

// The last line with "event": `event` (an empty object, and a failure, when there is none).
inline Json EventOf(const std::string& out, const std::string& event) {
  Json found = Json::object();
  for (Json& j : JsonLines(out))
    if (j.value("event", "") == event) found = std::move(j);
  EXPECT_FALSE(found.empty()) << "no \"" << event << "\" line in:\n" << out;
  return found;
}

inline Json ResultOf(const ProcessResult& r) { return EventOf(r.out, "result"); }

// The lines of `text` that start with "gpuslice: " — what the shim printed.
inline std::vector<std::string> GpusliceLines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (line.rfind("gpuslice: ", 0) == 0) lines.push_back(line);
  return lines;
}

inline std::string Describe(const ProcessResult& r) {
  return "exit " + std::to_string(r.exit_code) + " signal " + std::to_string(r.signal) + "\nstdout:\n" + r.out +
         "stderr:\n" + r.err;
}

// Polls `condition` every 5 ms until it holds or `timeout` passes; its last value.
template <typename Condition>
bool Eventually(Condition condition, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    if (condition()) return true;
    if (std::chrono::steady_clock::now() > deadline) return condition();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

class ShimTest : public SimTest {
 protected:
  void SetUp() override {
    SimTest::SetUp();
    char pattern[] = "/tmp/gpuslice-shim-test-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    state_dir_ = pattern;
    ASSERT_EQ(access(ShimPath().c_str(), R_OK), 0) << ShimPath() << " is missing: build the `gpuslice` target";
  }
  void TearDown() override {
    std::error_code ignored;
    std::filesystem::remove_all(state_dir_, ignored);
    SimTest::TearDown();
  }

  const std::string& state_dir() const { return state_dir_; }

  // A preloaded child's environment: the shim, the simulated driver, this test's state
  // directory, then `extra` ("NAME=value"; a later entry wins).
  std::vector<std::string> ShimEnv(const std::vector<std::string>& extra = {}) const {
    std::vector<std::string> env = {"LD_PRELOAD=" + ShimPath(), "LD_LIBRARY_PATH=" + SimLibDir(),
                                    "GPUSLICE_STATE_DIR=" + state_dir_};
    env.insert(env.end(), extra.begin(), extra.end());
    return env;
  }

  ProcessResult RunShimmed(std::vector<std::string> argv, const std::vector<std::string>& env = {},
                           int timeout_ms = 60000) const {
    return gpuslice::testing::Run(std::move(argv), ShimEnv(env), timeout_ms);
  }

  std::unique_ptr<Subprocess> StartShimmed(std::vector<std::string> argv,
                                           const std::vector<std::string>& env = {}) const {
    return std::make_unique<Subprocess>(std::move(argv), ShimEnv(env));
  }

  // Starts a program with --hold and waits until it holds what it could get.
  std::unique_ptr<Subprocess> StartHolder(std::vector<std::string> argv, const std::vector<std::string>& env = {},
                                          double hold_s = 60) const {
    argv.insert(argv.end(), {"--hold", std::to_string(hold_s)});
    auto p = StartShimmed(std::move(argv), env);
    EXPECT_TRUE(p->WaitForOutput("\"event\":\"holding\"", 30000)) << "holder did not report: " << p->StdoutSoFar();
    return p;
  }

  // Stops a holder (SIGTERM ends its hold; it frees and reports) and returns its result.
  static ProcessResult Stop(Subprocess& p) {
    p.Kill(SIGTERM);
    return p.Wait(30000);
  }

  broker::Snapshot BrokerSnapshot() const {
    std::string error;
    Result<broker::Snapshot> taken = broker::TakeSnapshot(state_dir_);
    EXPECT_TRUE(taken.ok()) << taken.message();
    broker::Snapshot snapshot = taken.ok() ? std::move(taken).value() : broker::Snapshot();
    return snapshot;
  }

  // Bytes `tenant` holds on every GPU together, per the broker (after reaping dead processes).
  uint64_t TenantUsed(const std::string& tenant) const {
    uint64_t used = 0;
    for (const auto& gpu : BrokerSnapshot().gpus)
      for (const auto& t : gpu.tenants)
        if (t.name == tenant) used += t.used;
    return used;
  }

  // Entries in the state directory.
  std::vector<std::string> StateDirEntries() const {
    std::vector<std::string> names;
    for (const auto& entry : std::filesystem::directory_iterator(state_dir_))
      names.push_back(entry.path().filename().string());
    return names;
  }

 private:
  std::string state_dir_;
};

}  // namespace gpuslice::testing
