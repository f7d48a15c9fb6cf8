// gpuslice-bench --real-gpu on a machine without an NVIDIA driver: the workloads cannot load
// libcuda.so.1 and exit at once. The bench must say so at once, in the workload's own words, and
// label the report by what ran (nothing), not "NVIDIA GPU (real GPU)" after a 60 s wait.
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/support/subprocess.h"
#include "tests/support/test_env.h"

namespace gpuslice::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using Json = nlohmann::json;
namespace fs = std::filesystem;

TEST(BenchRealGpuError, WithoutADriverTheWorkloadsOwnMessageComesAtOnceAndTheReportSaysNothingRan) {
  if (fs::exists("/dev/nvidiactl")) GTEST_SKIP() << "this machine has an NVIDIA driver";
  char pattern[] = "/tmp/gpuslice-bench-real-XXXXXX";
  const std::string report = mkdtemp(pattern);
  const auto start = std::chrono::steady_clock::now();
  // No LD_LIBRARY_PATH: the loader finds no libcuda.so.1, as on a machine without the driver.
  const ProcessResult r = gpuslice::testing::Run({"/usr/bin/env", "-u", "LD_LIBRARY_PATH", BinDir() + "/gpuslice-bench",
                                                  "--real-gpu", "--duration", "2", "--modes", "solo", "--quiet",
                                                  "--report", report, "two-equal-trainers"},
                                                 {}, 170000);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  // The readiness timeout is 60 s; the workloads' exit must end the wait (a loose bound: a loaded
  // machine takes a few seconds to start python and the processes).
  EXPECT_LT(seconds, 40.0) << "waited for the readiness timeout instead of the workload's exit";
  EXPECT_THAT(r.err, HasSubstr("libcuda.so.1")) << "the workload's own message";
  EXPECT_THAT(r.err, HasSubstr("exited before its device context existed"));
  EXPECT_THAT(r.err, Not(HasSubstr("did not become ready")));

  std::ifstream in(report + "/two-equal-trainers/results.json");
  std::stringstream text;
  text << in.rdbuf();
  const Json results = Json::parse(text.str(), nullptr, false);
  ASSERT_FALSE(results.is_discarded()) << text.str();
  const std::string description = results["platform"]["description"];
  EXPECT_THAT(description, Not(HasSubstr("(real GPU)")));
  EXPECT_THAT(description, HasSubstr("no GPU"));
  EXPECT_EQ(results["modes"]["solo"]["status"], "failed");
  EXPECT_THAT(results["modes"]["solo"]["reason"].get<std::string>(), HasSubstr("libcuda.so.1"));
  fs::remove_all(report);
}

}  // namespace
}  // namespace gpuslice::testing
