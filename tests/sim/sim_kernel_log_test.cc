// The kernel log (GPUSLICE_SIM_KERNEL_LOG, sim/kernel_log.h): every stretch of device time a
// process's kernel ran, as the device's own busy count saw it, and the summary of it
// (scripts/sim-kernel-log.py).
#include <cuda.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/clock.h"
#include "gpuslice/sim_query.h"
#include "tests/support/sim_driver_helpers.h"
#include "tests/support/subprocess.h"
#include "tests/support/test_env.h"

namespace gpuslice::testing {
namespace {

using Json = nlohmann::json;
using SimKernelLogTest = SimTest;

constexpr uint64_t kKernelNs = 3'000'000;  // longer than a timeslice: split between turns
constexpr int kKernels = 60;

// A child that launches `kKernels` kernels, two in flight.
int Launcher(int fd) {
  CUcontext ctx;
  CUmodule module;
  CUfunction spin;
  if (cuInit(0) || cuDevicePrimaryCtxRetain(&ctx, 0) || cuCtxSetCurrent(ctx)) return 1;
  if (cuModuleLoadData(&module, kTestPtx) || cuModuleGetFunction(&spin, module, "spin_ns")) return 2;
  Signal(fd);
  for (int i = 0; i < kKernels; ++i) {
    if (LaunchSpin(spin, kKernelNs) != CUDA_SUCCESS) return 3;
    if (i % 2 == 1 && cuCtxSynchronize() != CUDA_SUCCESS) return 4;
  }
  return cuCtxSynchronize() == CUDA_SUCCESS ? 0 : 5;
}

struct Stretch {
  pid_t pid;
  uint64_t kernel, start, end;
};

std::vector<Stretch> ReadLog(const std::string& path) {
  std::vector<Stretch> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    const Json j = Json::parse(line);
    EXPECT_EQ(j["device"], 0);
    out.push_back({j["pid"].get<pid_t>(), j["kernel"].get<uint64_t>(), j["start_ns"].get<uint64_t>(),
                   j["end_ns"].get<uint64_t>()});
  }
  return out;
}

TEST_F(SimKernelLogTest, EveryStretchOfEveryKernelIsLoggedOnceAndTheyNeverOverlap) {
  const std::string path = "/tmp/gpuslice-kernel-log-" + std::to_string(getpid()) + ".jsonl";
  std::filesystem::remove(path);
  SetEnv("GPUSLICE_SIM_KERNEL_LOG", path);
  std::vector<std::unique_ptr<ForkedChild>> children;
  std::vector<pid_t> pids;
  for (int i = 0; i < 2; ++i) {
    children.push_back(std::make_unique<ForkedChild>(Launcher));
    pids.push_back(children.back()->pid());
  }
  for (auto& c : children) ASSERT_TRUE(c->WaitSignal());
  for (auto& c : children) ASSERT_EQ(c->Wait(), 0);

  std::vector<Stretch> log = ReadLog(path);
  std::filesystem::remove(path);
  std::map<pid_t, std::map<uint64_t, uint64_t>> kernel_time;  // pid -> kernel -> its stretches' sum
  std::map<pid_t, uint64_t> busy;
  for (const Stretch& s : log) {
    ASSERT_GT(s.end, s.start);
    kernel_time[s.pid][s.kernel] += s.end - s.start;
    busy[s.pid] += s.end - s.start;
  }
  simquery::Snapshot snap;
  std::string error;
  ASSERT_TRUE(simquery::TakeSnapshot(state_path(), &snap, &error)) << error;
  for (pid_t pid : pids) {
    ASSERT_EQ(kernel_time[pid].size(), static_cast<size_t>(kKernels)) << pid;
    EXPECT_EQ(kernel_time[pid].begin()->first, 1u);
    for (const auto& [kernel, ns] : kernel_time[pid]) EXPECT_EQ(ns, kKernelNs) << pid << " kernel " << kernel;
    // What the device counted as the process's busy time, stretch by stretch.
    for (const auto& p : snap.devices[0].processes) {
      if (p.pid == pid) {
        EXPECT_EQ(p.busy_ns, busy[pid]);
      }
    }
  }
  // One context at a time: the two processes' kernels were split between turns, never overlaid.
  std::sort(log.begin(), log.end(), [](const Stretch& a, const Stretch& b) { return a.start < b.start; });
  size_t handovers = 0;
  for (size_t i = 1; i < log.size(); ++i) {
    EXPECT_GE(log[i].start, log[i - 1].end);
    handovers += log[i].pid != log[i - 1].pid;
  }
  EXPECT_GT(handovers, 10u);
}

TEST(SimKernelLogSummaryTest, IdleGapsAreSortedByWhoRanBeforeAndAfter) {
  const std::string path = "/tmp/gpuslice-kernel-log-summary-" + std::to_string(getpid()) + ".jsonl";
  {
    std::ofstream out(path);
    // Process 1 runs 0-1 ms and 1.2-2 ms (a gap of 0.2 ms to itself), process 2 from 2.5 ms (a
    // hand-over after 0.5 ms idle) to 3 ms, overlapping nothing.
    for (const auto& [pid, kernel, start, end] : std::vector<std::tuple<int, int, uint64_t, uint64_t>>{
             {1, 1, 0, 1'000'000}, {1, 2, 1'200'000, 2'000'000}, {2, 1, 2'500'000, 3'000'000}}) {
      out << Json{{"pid", pid}, {"device", 0}, {"kernel", kernel}, {"start_ns", start}, {"end_ns", end}}.dump() << "\n";
    }
  }
  const ProcessResult r = testing::Run(
      {"/usr/bin/env", "python3", SourceDir() + "/scripts/sim-kernel-log.py", path, "--label", "2=trainer"});
  std::filesystem::remove(path);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("idle 0.7 ms (23.3%)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("trainer: device time       0.5 ms"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("same process      1       0.2       200"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("another process      1       0.5       500"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace gpuslice::testing
