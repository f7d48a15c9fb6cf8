// gpuslice-workload run as a real child process over the simulated driver, which it finds the way
// the CUDA runtime finds libcuda (dlopen through LD_LIBRARY_PATH): the figures it reports agree
// with what the simulated device saw, refusals are results rather than failures, and usage or
// driver problems end with exit code 2 and one clear line. Bounds are loose: the machines that
// run this are small and shared.
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "gpuslice/sim_query.h"
#include "tests/support/subprocess.h"
#include "tests/support/test_env.h"
#include "workload/driver_table.h"
#include "workload/fault_kernel_ptx.h"
#include "workload/spin_kernel_ptx.h"

namespace gpuslice::testing {
namespace {

using ::testing::AllOf;
using ::testing::Ge;
using ::testing::HasSubstr;
using ::testing::Le;
using Json = nlohmann::json;

constexpr uint64_t kMi = 1ULL << 20;
constexpr char kPtxas[] = "/usr/local/cuda/bin/ptxas";

std::string Workload() { return BinDir() + "/gpuslice-workload"; }

bool FileExists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

// A fresh empty directory under /tmp, removed (with what the test put there) on destruction.
class TempDir {
 public:
  TempDir() {
    char pattern[] = "/tmp/gpuslice-workload-test-XXXXXX";
    path_ = mkdtemp(pattern);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Every stdout line, each of which must be one JSON object.
std::vector<Json> JsonLines(const std::string& out) {
  std::vector<Json> lines;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    Json j = Json::parse(line, nullptr, /*allow_exceptions=*/false);
    EXPECT_TRUE(j.is_object()) << "not a JSON object: " << line;
    if (j.is_object()) lines.push_back(std::move(j));
  }
  return lines;
}

std::vector<Json> Events(const std::string& out, const std::string& event) {
  std::vector<Json> found;
  for (Json& j : JsonLines(out)) {
    if (j.value("event", "") == event) found.push_back(std::move(j));
  }
  return found;
}

// The one result line, which must be the last line.
Json Result(const ProcessResult& r) {
  const std::vector<Json> lines = JsonLines(r.out);
  const std::vector<Json> results = Events(r.out, "result");
  EXPECT_EQ(results.size(), 1u) << r.out;
  if (results.size() != 1) return Json::object();
  EXPECT_EQ(lines.back(), results[0]) << "the result must come last: " << r.out;
  return results[0];
}

void ExpectOneLine(const std::string& text) {
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(text.find('\n'), text.size() - 1) << "expected one line, got: " << text;
}

class WorkloadTest : public SimTest {
 protected:
  // Runs the workload against the simulated driver (nothing else on its library path).
  static ProcessResult RunWorkload(std::vector<std::string> args, std::vector<std::string> env = {}) {
    args.insert(args.begin(), Workload());
    env.push_back("LD_LIBRARY_PATH=" + SimLibDir());
    return gpuslice::testing::Run(std::move(args), std::move(env));
  }

  // The simulated device's record of the process `pid`.
  static simquery::ProcessUsage UsageOf(int pid) {
    simquery::Snapshot snapshot;
    std::string error;
    EXPECT_TRUE(simquery::TakeSnapshot(simquery::StatePath(), &snapshot, &error)) << error;
    if (snapshot.devices.empty()) return {};
    for (const auto& p : snapshot.devices[0].processes) {
      if (p.pid == pid) return p;
    }
    ADD_FAILURE() << "the simulated device has no record of pid " << pid;
    return {};
  }
};

// ptxas accepts `ptx` for Hopper (skipped without the CUDA toolkit's assembler).
void ExpectAssemblesForHopper(const char* ptx_text, const std::string& entry) {
  if (!FileExists(kPtxas)) {
    GTEST_SKIP() << kPtxas << " not found: the CUDA toolkit's assembler is needed for this check";
  }
  TempDir dir;
  const std::string ptx = dir.path() + "/kernel.ptx";
  std::ofstream(ptx) << ptx_text;
  const ProcessResult r = gpuslice::testing::Run({kPtxas, "-arch=sm_90", ptx, "-o", dir.path() + "/kernel.cubin"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(FileExists(dir.path() + "/kernel.cubin"));
  EXPECT_THAT(std::string(ptx_text), HasSubstr(".visible .entry " + entry + "("));
}

TEST(WorkloadSpinKernelPtx, AssemblesWithPtxasForHopper) {
  ExpectAssemblesForHopper(workload::kSpinKernelPtx, "spin_ns");
}

TEST(WorkloadSpinKernelPtx, FaultKernelAssemblesWithPtxasForHopper) {
  ExpectAssemblesForHopper(workload::kFaultKernelPtx, "fault_illegal_address");
}

// cuGetProcAddress at CUDA_VERSION hands out the newest version of an entry point at or below it;
// calling that through an older version's PFN type would silently break the ABI.
TEST(WorkloadDriverTable, EachEntryPointHasTheTypeOfTheVersionItIsGiven) {
  std::ifstream in(std::string(GPUSLICE_CUDA_INCLUDE_DIR) + "/cudaTypedefs.h");
  ASSERT_TRUE(in) << "cannot read cudaTypedefs.h from " << GPUSLICE_CUDA_INCLUDE_DIR;
  std::stringstream text;
  text << in.rdbuf();
  const std::string typedefs = text.str();
  const std::regex pfn(R"(\*\s*PFN_(\w+?)_v(\d+)\))");  // "*PFN_cuMemAlloc_v3020)", no _ptsz/_ptds twins
  std::map<std::string, int> newest;
  for (auto it = std::sregex_iterator(typedefs.begin(), typedefs.end(), pfn); it != std::sregex_iterator(); ++it) {
    const int version = std::stoi((*it)[2]);
    if (version <= CUDA_VERSION) newest[(*it)[1]] = std::max(newest[(*it)[1]], version);
  }
#define GPUSLICE_EXPECT_NEWEST(name, pfn_type) \
  EXPECT_EQ(#pfn_type, "PFN_" #name "_v" + std::to_string(newest[#name])) << #name;
  GPUSLICE_WORKLOAD_ENTRY_POINTS(GPUSLICE_EXPECT_NEWEST)
#undef GPUSLICE_EXPECT_NEWEST
}

TEST_F(WorkloadTest, ComputeRunsTheRequestedKernelsAndReportsTheBusyFraction) {
  Subprocess child({Workload(), "compute", "--kernels", "50", "--kernel-us", "1000", "--label", "tenant-a",
                    "--ready-line"},
                   {"LD_LIBRARY_PATH=" + SimLibDir()});
  const ProcessResult r = child.Wait();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");

  const std::vector<Json> lines = JsonLines(r.out);
  ASSERT_GE(lines.size(), 2u) << r.out;
  EXPECT_EQ(lines.front()["event"], "ready");
  EXPECT_EQ(lines.front()["pid"], child.pid());
  for (const Json& line : lines) EXPECT_EQ(line.value("label", ""), "tenant-a") << line;

  const Json result = Result(r);
  EXPECT_EQ(result["kind"], "compute");
  EXPECT_EQ(result["kernels"], 50);
  EXPECT_EQ(result["kernel_us"], 1000);
  EXPECT_EQ(result["depth"], 2);
  EXPECT_EQ(result["stopped_by"], "kernels");
  // 50 kernels of 1 ms on one device take at least 50 ms. How busy the device stays depends on
  // how promptly this (shared, small) machine runs the host side: only a loose floor.
  const double elapsed = result["elapsed_s"];
  EXPECT_THAT(elapsed, AllOf(Ge(0.049), Le(10.0)));
  EXPECT_NEAR(result["busy_fraction"].get<double>(), 0.050 / elapsed, 1e-9);
  EXPECT_THAT(result["busy_fraction"].get<double>(), AllOf(Ge(0.1), Le(1.02)));
  EXPECT_NEAR(result["kernels_per_s"].get<double>(), 50 / elapsed, 1e-6);

  // The device saw what the workload reports: its kernels, and their time within the run.
  const simquery::ProcessUsage usage = UsageOf(child.pid());
  EXPECT_EQ(usage.kernels, 50u);
  EXPECT_GE(usage.busy_ns, 49'000'000u);
  EXPECT_LE(static_cast<double>(usage.busy_ns), elapsed * 1e9 * 1.02 + 2e6);
}

// --width wide fills every SM (SMs x 32 single-thread blocks); on half the SMs (an MPS client
// capped at 50%) each kernel takes two waves. Narrow kernels are one block, one wave.
TEST_F(WorkloadTest, WideKernelsFillTheDeviceAndTakeLongerOnHalfTheSms) {
  SetEnv("GPUSLICE_SIM_MPS", "1");
  const ProcessResult narrow = RunWorkload({"compute", "--kernels", "20", "--kernel-us", "1000"});
  ASSERT_EQ(narrow.exit_code, 0) << narrow.err;
  EXPECT_EQ(Result(narrow)["blocks"], 1);
  const ProcessResult wide = RunWorkload({"compute", "--kernels", "20", "--kernel-us", "1000", "--width", "wide"});
  ASSERT_EQ(wide.exit_code, 0) << wide.err;
  EXPECT_EQ(Result(wide)["blocks"], 132 * 32);
  const ProcessResult half = RunWorkload({"compute", "--kernels", "20", "--kernel-us", "1000", "--width", "wide"},
                                         {"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50"});
  ASSERT_EQ(half.exit_code, 0) << half.err;
  EXPECT_GE(Result(half)["elapsed_s"].get<double>(), 0.039);  // 20 kernels x 2 waves x 1 ms
  EXPECT_EQ(RunWorkload({"compute", "--width", "medium"}).exit_code, 2);
}

// --fault-after launches fault_illegal_address once: the context breaks, the run ends with exit 1
// naming CUDA_ERROR_ILLEGAL_ADDRESS, after a `fault` line (what gpuslice-bench's fault_at uses).
TEST_F(WorkloadTest, FaultAfterBreaksTheContextAndEndsTheRun) {
  const ProcessResult r = RunWorkload({"compute", "--duration", "5", "--kernel-us", "1000", "--fault-after", "0.05"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr("CUDA_ERROR_ILLEGAL_ADDRESS"));
  const std::vector<Json> faults = Events(r.out, "fault");
  ASSERT_EQ(faults.size(), 1u) << r.out;
  EXPECT_GE(faults[0]["elapsed_s"].get<double>(), 0.05);
  EXPECT_TRUE(Events(r.out, "result").empty()) << r.out;
  // The control: without --fault-after the same run ends cleanly.
  EXPECT_EQ(RunWorkload({"compute", "--kernels", "50", "--kernel-us", "1000"}).exit_code, 0);
  EXPECT_EQ(RunWorkload({"compute", "--fault-after", "-1"}).exit_code, 2);
}

TEST_F(WorkloadTest, ComputeForADurationStopsOnTimeAndReportsProgress) {
  const ProcessResult r =
      RunWorkload({"compute", "--duration", "0.6", "--kernel-us", "500", "--depth", "3", "--report-interval", "0.1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Json result = Result(r);
  EXPECT_EQ(result["stopped_by"], "duration");
  EXPECT_EQ(result["depth"], 3);
  EXPECT_THAT(result["elapsed_s"].get<double>(), AllOf(Ge(0.6), Le(4.0)));
  EXPECT_GT(result["kernels"].get<uint64_t>(), 0u);

  const std::vector<Json> progress = Events(r.out, "progress");
  EXPECT_GE(progress.size(), 2u) << r.out;
  uint64_t previous = 0;
  for (const Json& p : progress) {
    EXPECT_GE(p["kernels"].get<uint64_t>(), previous) << "progress counts are cumulative";
    previous = p["kernels"].get<uint64_t>();
    EXPECT_LE(p["kernels"].get<uint64_t>(), result["kernels"].get<uint64_t>());
  }
}

TEST_F(WorkloadTest, SigtermEndsADurationRunEarlyWithItsResult) {
  Subprocess child({Workload(), "compute", "--duration", "120", "--ready-line"}, {"LD_LIBRARY_PATH=" + SimLibDir()});
  ASSERT_TRUE(child.WaitForOutput("\"event\":\"ready\"", 60000)) << child.StdoutSoFar();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  child.Kill(SIGTERM);
  const ProcessResult r = child.Wait(60000);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Json result = Result(r);
  EXPECT_EQ(result["stopped_by"], "signal");
  EXPECT_LT(result["elapsed_s"].get<double>(), 60.0);
  EXPECT_GT(result["kernels"].get<uint64_t>(), 0u);
}

TEST_F(WorkloadTest, LatencyReportsOrderedPercentilesAboveTheKernelTime) {
  const ProcessResult r = RunWorkload(
      {"latency", "--requests", "40", "--period-ms", "5", "--kernels-per-request", "3", "--kernel-us", "200"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Json result = Result(r);
  EXPECT_EQ(result["kind"], "latency");
  EXPECT_EQ(result["requests"], 40);
  EXPECT_EQ(result["stopped_by"], "requests");
  // A request is three 200 us kernels in a row: never faster than 600 us.
  const double min = result["min_us"], p50 = result["p50_us"], p90 = result["p90_us"], p99 = result["p99_us"],
               p999 = result["p999_us"], max = result["max_us"];
  EXPECT_GE(min, 550.0);
  EXPECT_LE(p50, 50'000.0);
  EXPECT_LE(min, p50);
  EXPECT_LE(p50, p90);
  EXPECT_LE(p90, p99);
  EXPECT_LE(p99, p999);
  EXPECT_LE(p999, max);
  // 40 periods of 5 ms.
  EXPECT_THAT(result["elapsed_s"].get<double>(), AllOf(Ge(0.19), Le(10.0)));
}

TEST_F(WorkloadTest, LatencyWritesEveryRecordedLatencyToTheLatenciesFile) {
  TempDir dir;
  const std::string path = dir.path() + "/latencies.txt";
  const ProcessResult r = RunWorkload({"latency", "--requests", "25", "--period-ms", "2", "--kernels-per-request", "2",
                                       "--kernel-us", "100", "--latencies-file", path});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Json result = Result(r);
  std::ifstream in(path);
  std::vector<double> latencies;
  for (double us; in >> us;) latencies.push_back(us);
  ASSERT_EQ(latencies.size(), 25u);
  // The file holds the very samples the result summarises.
  EXPECT_NEAR(*std::min_element(latencies.begin(), latencies.end()), result["min_us"].get<double>(), 0.002);
  EXPECT_NEAR(*std::max_element(latencies.begin(), latencies.end()), result["max_us"].get<double>(), 0.002);
}

TEST_F(WorkloadTest, LatencyRunsTheWarmupsRequestsWithoutRecordingThem) {
  TempDir dir;
  const std::string path = dir.path() + "/latencies.txt";
  // 0.2 s of warm-up at one request every 5 ms: some 40 requests run before the first recorded.
  const ProcessResult r = RunWorkload({"latency", "--warmup-s", "0.2", "--requests", "10", "--period-ms", "5",
                                       "--kernels-per-request", "1", "--kernel-us", "200", "--latencies-file", path});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Json result = Result(r);
  EXPECT_EQ(result["requests"], 10);
  EXPECT_EQ(result["warmup_s"], 0.2);
  // A loaded machine may miss periods, so fewer than 40: but far more than the one unrecorded
  // request a run without warm-up has.
  EXPECT_THAT(result["warmup_requests"].get<uint64_t>(), AllOf(Ge(10u), Le(42u)));
  EXPECT_GE(result["warmup_max_us"].get<double>(), 190.0);
  EXPECT_GE(result["elapsed_s"].get<double>(), 0.2);
  std::ifstream in(path);
  size_t lines = 0;
  for (double us; in >> us;) ++lines;
  EXPECT_EQ(lines, 10u);  // only the recorded requests
}

TEST_F(WorkloadTest, AnUnwritableLatenciesFileIsAUsageError) {
  const ProcessResult r = RunWorkload({"latency", "--requests", "1", "--latencies-file", "/nonexistent-dir/x.txt"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr("--latencies-file"));
  EXPECT_THAT(r.err, HasSubstr("/nonexistent-dir/x.txt"));
}

TEST_F(WorkloadTest, LatencyCountsThePeriodsARequestOverran) {
  // Each request takes 3 ms against a 1 ms period: at least two boundaries pass during each.
  const ProcessResult r = RunWorkload(
      {"latency", "--requests", "10", "--period-ms", "1", "--kernels-per-request", "3", "--kernel-us", "1000"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Json result = Result(r);
  EXPECT_EQ(result["requests"], 10);
  EXPECT_GE(result["missed_periods"].get<uint64_t>(), 18u);
}

TEST_F(WorkloadTest, MemoryRefusalsAreTheResultNotAFailure) {
  SetEnv("GPUSLICE_SIM_MEMORY", "1Gi");
  const ProcessResult r = RunWorkload({"memory", "--chunk", "256Mi", "--count", "6"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Json result = Result(r);
  EXPECT_EQ(result["api"], "alloc");
  EXPECT_EQ(result["chunk_bytes"], 256 * kMi);
  EXPECT_EQ(result["allocated"], 4);
  EXPECT_EQ(result["refused"], 2);
  EXPECT_EQ(result["refusals"], Json({{"CUDA_ERROR_OUT_OF_MEMORY", 2}}));
  EXPECT_EQ(result["bytes_obtained"], 1024 * kMi);
  EXPECT_EQ(result["mem_before"]["total"], 1024 * kMi);
  EXPECT_EQ(result["mem_held"]["free"], result["mem_before"]["free"].get<uint64_t>() - 1024 * kMi);
  EXPECT_EQ(result["mem_after"], result["mem_before"]);
}

TEST_F(WorkloadTest, MemoryHeldByOneProcessIsRefusedToAnother) {
  SetEnv("GPUSLICE_SIM_MEMORY", "1Gi");
  Subprocess holder({Workload(), "memory", "--chunk", "256Mi", "--count", "3", "--hold", "120"},
                    {"LD_LIBRARY_PATH=" + SimLibDir()});
  ASSERT_TRUE(holder.WaitForOutput("\"event\":\"holding\"", 60000)) << holder.StdoutSoFar();

  const ProcessResult second = RunWorkload({"memory", "--chunk", "256Mi", "--count", "2"});
  ASSERT_EQ(second.exit_code, 0) << second.err;
  const Json result = Result(second);
  EXPECT_EQ(result["allocated"], 1);
  EXPECT_EQ(result["refused"], 1);

  holder.Kill(SIGTERM);  // ends the hold early; the memory is freed and the result still printed
  const ProcessResult held = holder.Wait(60000);
  ASSERT_EQ(held.exit_code, 0) << held.err;
  const Json held_result = Result(held);
  EXPECT_EQ(held_result["allocated"], 3);
  EXPECT_EQ(held_result["interrupted"], true);
}

class WorkloadMemoryApiTest : public WorkloadTest, public ::testing::WithParamInterface<const char*> {};

TEST_P(WorkloadMemoryApiTest, ObtainsTouchesAndReturnsSmallChunks) {
  const bool touch = std::string(GetParam()) != "array";  // arrays cannot be memset
  std::vector<std::string> args = {"memory", "--api", GetParam(), "--chunk", "4Mi", "--count", "2"};
  if (touch) args.push_back("--touch");
  const ProcessResult r = RunWorkload(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  const Json result = Result(r);
  EXPECT_EQ(result["api"], GetParam());
  EXPECT_EQ(result["allocated"], 2);
  EXPECT_EQ(result["refused"], 0);
  EXPECT_EQ(result["touch"], touch);
  // vmm rounds up to the granularity and pitch pads rows: never less than asked for.
  EXPECT_GE(result["bytes_obtained"].get<uint64_t>(), 8 * kMi);
  EXPECT_EQ(result["mem_after"]["free"], result["mem_before"]["free"]) << "everything obtained was given back";
}

INSTANTIATE_TEST_SUITE_P(EveryApi, WorkloadMemoryApiTest,
                         ::testing::Values("alloc", "pitch", "managed", "async", "pool", "vmm", "array"),
                         [](const ::testing::TestParamInfo<const char*>& info) { return std::string(info.param); });

TEST_F(WorkloadTest, BadOptionsExitWithTheUsageCode) {
  const std::vector<std::vector<std::string>> bad = {
      {},
      {"dance"},
      {"compute", "--depth", "0"},
      {"compute", "--kernel-us", "-5"},
      {"latency", "--period-ms", "0"},
      {"latency", "--host-gap-us", "300"},
      {"latency", "--warmup-s", "-1"},
      {"latency", "--dependent", "--host-gap-us", "2000000"},
      {"compute", "--duration", "1", "--kernels", "5"},
      {"memory", "--chunk", "12X"},
      {"memory", "--chunk", "0"},
      {"memory", "--api", "bogus"},
      {"memory", "--api", "array", "--chunk", "5Gi"},
      {"memory", "--api", "array", "--touch"},
  };
  for (const auto& args : bad) {
    const ProcessResult r = RunWorkload(args);
    std::string shown;
    for (const auto& a : args) shown += a + " ";
    EXPECT_EQ(r.exit_code, 2) << shown << "\n" << r.err;
    EXPECT_FALSE(r.err.empty()) << shown;
    EXPECT_TRUE(Events(r.out, "result").empty()) << shown << r.out;
  }
}

TEST_F(WorkloadTest, NoSuchDeviceExitsWithTheUsageCode) {
  const ProcessResult r = RunWorkload({"compute", "--kernels", "1", "--device", "7"});
  EXPECT_EQ(r.exit_code, 2);
  ExpectOneLine(r.err);
  EXPECT_THAT(r.err, HasSubstr("cuDeviceGet"));
  EXPECT_THAT(r.err, HasSubstr("CUDA_ERROR_INVALID_DEVICE"));
}

TEST_F(WorkloadTest, WithoutADriverItSaysSoAndExitsWithTheUsageCode) {
  // Only the empty directory is searched besides the system's own paths; a machine with a real
  // driver installed there cannot show this.
  const ProcessResult cache = gpuslice::testing::Run({"/bin/sh", "-c", "/sbin/ldconfig -p 2>/dev/null || ldconfig -p"});
  if (cache.out.find("libcuda.so.1 ") != std::string::npos)
    GTEST_SKIP() << "a system libcuda.so.1 is on the loader's path (a real driver is installed)";
  TempDir empty;
  const ProcessResult r =
      gpuslice::testing::Run({Workload(), "compute", "--kernels", "1"}, {"LD_LIBRARY_PATH=" + empty.path()});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(r.out, "");
  ExpectOneLine(r.err);
  EXPECT_THAT(r.err, HasSubstr("cannot load the CUDA driver"));
  EXPECT_THAT(r.err, HasSubstr("libcuda.so.1"));
}

TEST_F(WorkloadTest, TheToolkitStubIsNotTakenForADriver) {
  const std::string stub = "/usr/local/cuda/lib64/stubs/libcuda.so";
  if (!FileExists(stub)) GTEST_SKIP() << stub << " not found: no CUDA toolkit stub to try";
  TempDir dir;
  ASSERT_EQ(symlink(stub.c_str(), (dir.path() + "/libcuda.so.1").c_str()), 0);
  const ProcessResult r = gpuslice::testing::Run({Workload(), "memory"}, {"LD_LIBRARY_PATH=" + dir.path()});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  ExpectOneLine(r.err);
  EXPECT_THAT(r.err, HasSubstr("CUDA_ERROR_STUB_LIBRARY"));
}

}  // namespace
}  // namespace gpuslice::testing
