// Checks that need a real NVIDIA GPU and driver (CTest label `gpu`). Without one each case
// reports itself skipped. scripts/gpu-check.sh runs them, with the demo, in one go.
//
// The children run without the simulator on LD_LIBRARY_PATH, so dlopen("libcuda.so.1") finds
// the installed driver.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "tests/support/subprocess.h"
#include "tests/support/test_env.h"

namespace gpuslice::testing {
namespace {

const std::vector<std::string> kRealDriverEnv = {"LD_LIBRARY_PATH="};

nlohmann::json ResultOf(const ProcessResult& r) {
  nlohmann::json last;
  size_t start = 0;
  while (start < r.out.size()) {
    const size_t end = r.out.find('\n', start);
    const std::string line = r.out.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (!line.empty() && line[0] == '{') {
      auto j = nlohmann::json::parse(line, nullptr, false);
      if (!j.is_discarded() && j.value("event", "") == "result") last = j;
    }
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return last;
}

class GpuRealDriverTest : public SimTest {
 protected:
  void SetUp() override {
    SimTest::SetUp();
    const ProcessResult probe =
        gpuslice::testing::Run({BinDir() + "/gpuslice-workload", "compute", "--kernels", "1", "--kernel-us", "10"},
                               kRealDriverEnv);
    if (probe.exit_code != 0) GTEST_SKIP() << "no usable NVIDIA driver/GPU: " << probe.err;
  }
};

TEST_F(GpuRealDriverTest, SpinKernelOccupiesTheGpuForItsDuration) {
  const ProcessResult r = gpuslice::testing::Run({BinDir() + "/gpuslice-workload", "compute", "--kernels", "500",
                                                  "--kernel-us", "2000", "--depth", "4"},
                                                 kRealDriverEnv);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto result = ResultOf(r);
  EXPECT_EQ(result["kernels"], 500);
  // %globaltimer spins: 500 x 2 ms back to back should take about one second.
  EXPECT_GT(result["busy_fraction"].get<double>(), 0.85) << r.out;
  EXPECT_LT(result["busy_fraction"].get<double>(), 1.05) << r.out;
}

TEST_F(GpuRealDriverTest, LatencyRequestsTakeAtLeastTheirKernels) {
  const ProcessResult r =
      gpuslice::testing::Run({BinDir() + "/gpuslice-workload", "latency", "--requests", "100", "--kernel-us", "200",
                              "--kernels-per-request", "3", "--period-ms", "5"},
                             kRealDriverEnv);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto result = ResultOf(r);
  EXPECT_GE(result["p50_us"].get<double>(), 590.0) << r.out;
  EXPECT_LT(result["p50_us"].get<double>(), 5000.0) << r.out;
}

TEST_F(GpuRealDriverTest, EveryAllocationFamilyWorks) {
  for (const char* api : {"alloc", "pitch", "managed", "async", "pool", "vmm", "array"}) {
    const ProcessResult r = gpuslice::testing::Run({BinDir() + "/gpuslice-workload", "memory", "--api", api, "--chunk",
                                                    "64Mi", "--count", "2"},
                                                   kRealDriverEnv);
    ASSERT_EQ(r.exit_code, 0) << api << ": " << r.err;
    EXPECT_EQ(ResultOf(r)["allocated"], 2) << api << ": " << r.out;
  }
}

TEST_F(GpuRealDriverTest, ProcAddressVersionRuleMatchesTheRealDriver) {
  // The rule gpuslice relies on (REFERENCE.md §1), asked of the real driver for every
  // PFN_*_v* typedef. Mismatches are printed in full for the record.
  const ProcessResult r = gpuslice::testing::Run({BinDir() + "/gpuslice-proc-rule-check"}, kRealDriverEnv);
  ASSERT_NE(r.exit_code, 2) << r.err;
  const auto summary = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(summary.is_discarded()) << r.out;
  std::printf("%s\n", summary.dump(2).c_str());
  EXPECT_GT(summary["checked"].get<int>(), 1000);
  EXPECT_EQ(summary["mismatches"].get<int>(), 0) << summary.dump(2);
}

}  // namespace
}  // namespace gpuslice::testing
