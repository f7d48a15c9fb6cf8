// MIG and MPS on a real NVIDIA GPU (CTest label `gpu`; scripts/gpu-check.sh runs them). They use
// only what the machine already has — MIG instances that exist (nvidia-smi -L lists them) and an
// MPS control daemon that already runs — and never change the GPU's settings: without either,
// the case reports itself skipped with the reason. The simulated counterparts are
// sim_mig_test, sim_mps_test and shim_mig_test; measured figures (four-ways),
// docs/results/2026-12-02-benchmark-results.md.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <regex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/support/shim_fixture.h"
#include "tests/support/subprocess.h"
#include "tests/support/test_env.h"

namespace gpuslice::testing {
namespace {

using ::testing::HasSubstr;

std::string Workload() { return BinDir() + "/gpuslice-workload"; }

// The last JSON line of `kind` ("ready", "result") a workload printed.
nlohmann::json LineOf(const std::string& out, const std::string& kind) {
  nlohmann::json found;
  for (size_t start = 0; start < out.size();) {
    const size_t end = out.find('\n', start);
    auto j = nlohmann::json::parse(out.substr(start, end - start), nullptr, false);
    if (!j.is_discarded() && j.is_object() && j.value("event", "") == kind) found = j;
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return found;
}

// cuDeviceTotalMem as the vector-add sample prints it ("cuDeviceTotalMem 1073741824 B"), or 0.
uint64_t TotalMemPrinted(const std::string& out) {
  std::smatch m;
  return std::regex_search(out, m, std::regex(R"(cuDeviceTotalMem (\d+) B)")) ? std::stoull(m[1].str()) : 0;
}

class GpuMigMpsTest : public ShimTest {
 protected:
  void SetUp() override {
    ShimTest::SetUp();
    const ProcessResult probe =
        gpuslice::testing::Run({Workload(), "compute", "--kernels", "1", "--kernel-us", "10"}, {"LD_LIBRARY_PATH="});
    if (probe.exit_code != 0) GTEST_SKIP() << "no usable NVIDIA driver/GPU: " << probe.err;
  }
};

// The first MIG instance nvidia-smi lists, or "".
std::string FirstMigUuid() {
  const ProcessResult r = gpuslice::testing::Run({"/usr/bin/env", "nvidia-smi", "-L"});
  std::smatch m;
  return std::regex_search(r.out, m, std::regex(R"(UUID: (MIG-[0-9A-Fa-f-]+))")) ? m[1].str() : "";
}

TEST_F(GpuMigMpsTest, MigInstanceRunsWideKernelsAndGpusliceQuotasAreOfTheInstance) {
  const std::string mig = FirstMigUuid();
  if (mig.empty())
    GTEST_SKIP() << "no MIG instance on this machine (nvidia-smi -L lists none); this check uses existing "
                    "instances and never creates them";
  const std::string visible = "CUDA_VISIBLE_DEVICES=" + mig;
  const ProcessResult wide = gpuslice::testing::Run({Workload(), "compute", "--kernels", "200", "--kernel-us", "1000",
                                                     "--width", "wide", "--ready-line"},
                                                    {"LD_LIBRARY_PATH=", visible});
  ASSERT_EQ(wide.exit_code, 0) << Describe(wide);
  EXPECT_THAT(LineOf(wide.out, "ready").value("device_name", ""), HasSubstr("MIG")) << wide.out;
  // Alone in its instance a wide kernel is one wave: about its spin time each.
  EXPECT_GT(LineOf(wide.out, "result").value("busy_fraction", 0.0), 0.8) << wide.out;

  const std::string sample = BinDir() + "/vector_add_driver";
  const ProcessResult plain = gpuslice::testing::Run({sample}, {"LD_LIBRARY_PATH=", visible});
  ASSERT_EQ(plain.exit_code, 0) << Describe(plain);
  const uint64_t instance = TotalMemPrinted(plain.out);
  ASSERT_GT(instance, 0u) << plain.out;
  const ProcessResult quarter =
      gpuslice::testing::Run({sample}, {"LD_LIBRARY_PATH=", visible, "LD_PRELOAD=" + ShimPath(),
                                        "GPUSLICE_STATE_DIR=" + state_dir(), "GPUSLICE_TENANT=gpu-mig",
                                        "GPUSLICE_MEMORY_LIMIT=25%"});
  ASSERT_EQ(quarter.exit_code, 0) << Describe(quarter);
  const uint64_t seen = TotalMemPrinted(quarter.out);
  EXPECT_GE(seen, instance / 4 - (2u << 20)) << quarter.out;  // 25% of the instance, not of the GPU
  EXPECT_LE(seen, instance / 4 + (2u << 20)) << quarter.out;
}

// Whether an MPS control daemon listens (its pipe directory has a control socket).
bool MpsDaemonRunning() {
  const char* dir = std::getenv("CUDA_MPS_PIPE_DIRECTORY");
  const std::string control = std::string(dir && *dir ? dir : "/tmp/nvidia-mps") + "/control";
  struct stat st {};
  return stat(control.c_str(), &st) == 0;
}

TEST_F(GpuMigMpsTest, MpsActiveThreadCapOfHalfHalvesAWideKernelsThroughput) {
  if (!MpsDaemonRunning())
    GTEST_SKIP() << "no MPS control daemon runs here ($CUDA_MPS_PIPE_DIRECTORY or /tmp/nvidia-mps has no control "
                    "socket); this check uses a running daemon and never starts one";
  const std::vector<std::string> argv = {Workload(),    "compute", "--kernels", "500",
                                         "--kernel-us", "2000",    "--width",   "wide"};
  const ProcessResult full = gpuslice::testing::Run(argv, {"LD_LIBRARY_PATH="});
  const ProcessResult half = gpuslice::testing::Run(argv, {"LD_LIBRARY_PATH=", "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50"});
  ASSERT_EQ(full.exit_code, 0) << Describe(full);
  ASSERT_EQ(half.exit_code, 0) << Describe(half);
  const double ratio = LineOf(half.out, "result").value("kernels_per_s", 0.0) /
                       LineOf(full.out, "result").value("kernels_per_s", 1.0);
  // Half the SMs: every wide kernel takes two waves (the model's 0.5; docs/simulator.md, MPS).
  EXPECT_GT(ratio, 0.4) << full.out << half.out;
  EXPECT_LT(ratio, 0.65) << full.out << half.out;
}

}  // namespace
}  // namespace gpuslice::testing
