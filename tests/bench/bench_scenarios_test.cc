// gpuslice-bench over every bundled scenario in its reduced form (--quick) on the simulated GPU:
// it finishes cleanly, reports every tenant in every mode it ran, no tenant ever held more device
// memory than its quota under gpuslice, and the report folder has its summary and charts. A
// scenario with a mistake is refused in one line naming the file and the key.
//
// To keep CI's test time down, each scenario runs in a representative subset of its modes
// (ModesToRun): gpuslice, the mode its quotas, requests, classes, events and targets drive, for
// every scenario; solo, unmanaged, MPS and MIG for four-ways, which also checks what each mode
// isolates (a fault, an over-allocating tenant), and MPS for two-wide-trainers. What is checked is the
// report's structure, not the figures (docs/results/2026-12-02-benchmark-results.md has a run's).
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/support/subprocess.h"
#include "tests/support/test_env.h"

namespace gpuslice::testing {
namespace {

using ::testing::HasSubstr;
using Json = nlohmann::json;
namespace fs = std::filesystem;

std::string Bench() { return BinDir() + "/gpuslice-bench"; }
std::string ScenarioDir() { return SourceDir() + "/bench/scenarios"; }

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

class TempDir {
 public:
  TempDir() {
    char pattern[] = "/tmp/gpuslice-bench-test-XXXXXX";
    path_ = mkdtemp(pattern);
  }
  ~TempDir() { fs::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::vector<std::string> BundledScenarios() {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(ScenarioDir())) {
    if (entry.path().extension() == ".yaml") names.push_back(entry.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

// What the scenario file says, read with two patterns rather than a YAML parser: the bundled
// files keep `modes: [...]` on one line and each tenant's `- name:` at the tenant's indentation.
struct Expected {
  std::vector<std::string> modes;
  std::vector<std::string> tenants;
  bool has_latency_tenant = false;
  size_t targets = 0;  // items of `targets:` (each begins `  - metric:` or `  - {metric:`)
};

Expected ReadExpected(const std::string& text) {
  Expected e;
  std::smatch m;
  if (std::regex_search(text, m, std::regex(R"(\nmodes:\s*\[([^\]]*)\])"))) {
    std::stringstream list(m[1].str());
    for (std::string mode; std::getline(list, mode, ',');) {
      mode.erase(std::remove(mode.begin(), mode.end(), ' '), mode.end());
      e.modes.push_back(mode);
    }
  }
  const std::regex tenant(R"(\n  - name:\s*([A-Za-z0-9._-]+))");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), tenant); it != std::sregex_iterator(); ++it)
    e.tenants.push_back((*it)[1].str());
  e.has_latency_tenant = text.find("kind: latency") != std::string::npos;
  if (const size_t at = text.find("\ntargets:"); at != std::string::npos) {
    const std::string list = text.substr(at);
    const std::regex item(R"(\n  - \{?metric:)");
    e.targets = static_cast<size_t>(
        std::distance(std::sregex_iterator(list.begin(), list.end(), item), std::sregex_iterator()));
  }
  return e;
}

TEST(BenchScenariosTest, TheLibraryHasTheDocumentedScenarios) {
  const std::vector<std::string> names = BundledScenarios();
  for (const char* name : {"two-equal-trainers",  "weighted-75-25",    "inference-beside-training",
                           "eight-small-tenants", "memory-hog",        "four-equal-tenants",
                           "eight-equal-tenants", "weighted-50-30-20", "alone-request-25",
                           "alone-limit-30",      "alone-limit-90",    "latency-beside-compute",
                           "sync-beside-async",   "latency-class",     "latency-standard",
                           "stalled-holder",      "dying-waiters",     "arrival-at-idle-gpu",
                           "two-wide-trainers",   "four-ways",         "standard-beside-three-process-trainer"})
    EXPECT_NE(std::find(names.begin(), names.end(), name), names.end()) << name;
}

TEST(BenchScenariosTest, ThePythonUnitTestsOfTheFiguresPass) {
  // Water-filling, windows, Jain's index, percentiles and the scenario checks (*_test.py beside
  // the modules they test).
  const std::string bench = SourceDir() + "/bench";
  const ProcessResult r = gpuslice::testing::Run({"/usr/bin/env", "python3", "-m", "unittest", "discover", "-s", bench,
                                                  "-t", bench, "-p", "*_test.py"},
                                                 {"PYTHONDONTWRITEBYTECODE=1"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr("OK"));
}

// The scenario that runs in every mode of the library; the others run in gpuslice only (above).
constexpr char kEveryModeScenario[] = "four-ways";

std::vector<std::string> ModesToRun(const std::string& scenario, const std::vector<std::string>& modes) {
  const bool has_gpuslice = std::find(modes.begin(), modes.end(), "gpuslice") != modes.end();
  if (scenario == kEveryModeScenario || !has_gpuslice) return modes;
  return {"gpuslice"};
}

std::string Joined(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : ",") + item;
  return out;
}

// four-ways: what each mode isolates, independent of timing. The batch job's fault ends only its
// own process, except under MPS, where it reaches every client; the trainer's allocations beyond
// its 40 GiB are refused (quota, pinned-memory limit, its 4g.40gb instance) everywhere but
// unmanaged, where it fills the GPU and the service's model load is refused instead.
void CheckWhatEachModeIsolates(const Json& results) {
  constexpr uint64_t kTrainerQuota = 40ULL << 30;
  for (const std::string mode : {"unmanaged", "gpuslice", "mps", "mig"}) {
    SCOPED_TRACE("four-ways, mode " + mode);
    const Json& t = results["modes"][mode]["tenants"];
    EXPECT_EQ(t["crasher"].value("ended_by_own_fault", 0), 1) << t["crasher"].dump();
    for (const char* other : {"service", "trainer"}) {
      if (mode == "mps") {
        EXPECT_GE(t[other].value("ended_by_others_fault", 0), 1) << other;
      } else {
        EXPECT_EQ(t[other].value("ended_by_others_fault", 0), 0) << other;
      }
    }
    const int trainer_refused = t["trainer"]["allocations"]["refused"].get<int>();
    const int service_refused = t["service"]["allocations"]["refused"].get<int>();
    if (mode == "unmanaged") {
      EXPECT_EQ(service_refused, 1);
      EXPECT_GT(t["trainer"]["peak_memory"].get<uint64_t>(), kTrainerQuota);
    } else {
      EXPECT_GT(trainer_refused, 0);
      EXPECT_EQ(service_refused, 0);
      EXPECT_LE(t["trainer"]["peak_memory"].get<uint64_t>(), kTrainerQuota);
    }
  }
  EXPECT_EQ(results["scenario"]["mig_layout"].size(), 3u);
}

class BundledScenarioTest : public ::testing::TestWithParam<std::string> {};

TEST_P(BundledScenarioTest, RunsInReducedFormAndReportsEveryTenantInEveryModeItRan) {
  const std::string file = ScenarioDir() + "/" + GetParam() + ".yaml";
  Expected expected = ReadExpected(ReadFile(file));
  ASSERT_FALSE(expected.modes.empty()) << file;
  ASSERT_FALSE(expected.tenants.empty()) << file;
  expected.modes = ModesToRun(GetParam(), expected.modes);
  TempDir report;

  const ProcessResult r = gpuslice::testing::Run({Bench(), "--sim", "--quick", "--modes", Joined(expected.modes),
                                                  "--report", report.path(), file},
                                                 {}, 280'000);
  ASSERT_EQ(r.exit_code, 0) << r.out << "\n" << r.err;
  EXPECT_THAT(r.out, HasSubstr("quota violations"));  // the table on stdout

  const fs::path folder = fs::path(report.path()) / GetParam();
  const Json results = Json::parse(ReadFile(folder / "results.json"));
  // NP is progress relative to running alone: only scenarios with a solo mode have it.
  const bool has_solo = std::find(expected.modes.begin(), expected.modes.end(), "solo") != expected.modes.end();
  // Every target the file carries is evaluated and reported (met or not: never a failure).
  ASSERT_EQ(results["targets"].size(), expected.targets);
  for (const Json& t : results["targets"]) {
    EXPECT_FALSE(t["source"].get<std::string>().empty());
    if (t["met"].is_null()) {
      EXPECT_FALSE(t["why"].get<std::string>().empty()) << t.dump();
    } else {
      EXPECT_TRUE(t["measured"].is_number()) << t.dump();
      EXPECT_THAT(r.out, HasSubstr(t["target"].get<std::string>()));  // printed with the table
    }
  }
  for (const std::string& mode : expected.modes) {
    SCOPED_TRACE("mode " + mode);
    ASSERT_TRUE(results["modes"].contains(mode));
    const Json& m = results["modes"][mode];
    ASSERT_EQ(m["status"], "ran") << m.dump();  // nothing is skipped on the simulated GPU
    for (const std::string& tenant : expected.tenants) {
      ASSERT_TRUE(m["tenants"].contains(tenant)) << tenant;
      const Json& t = m["tenants"][tenant];
      EXPECT_TRUE(t.contains("share")) << tenant;
      if (mode != "solo" && t.contains("kernels_per_s") && has_solo) {
        EXPECT_GT(t["np"].get<double>(), 0.0) << tenant;
      }
      if (t.contains("latency")) {
        EXPECT_GT(t["latency"]["p99_us"].get<double>(), 0.0) << tenant;
      }
    }
    if (mode == "gpuslice") {
      EXPECT_EQ(m["run"]["quota_violations"], 0);
      EXPECT_GT(m["run"]["steady_windows"].get<int>(), 0);
    }
  }

  if (GetParam() == kEveryModeScenario) CheckWhatEachModeIsolates(results);

  const std::string summary = ReadFile(folder / "summary.md");
  EXPECT_THAT(summary, HasSubstr("## Per tenant"));
  std::set<std::string> charts;
  int shared_modes = 0;
  for (const std::string& mode : expected.modes) {
    if (mode == "solo") continue;
    charts.insert("share-" + mode + ".svg");
    ++shared_modes;
  }
  if (shared_modes >= 2) charts.insert("modes.svg");  // the modes side by side
  if (expected.has_latency_tenant) charts.insert("latency-cdf.svg");
  for (const std::string& chart : charts) {
    SCOPED_TRACE(chart);
    const std::string svg = ReadFile(folder / chart);
    EXPECT_THAT(svg, HasSubstr("<svg"));
    EXPECT_THAT(svg, HasSubstr("</svg>"));
    EXPECT_THAT(summary, HasSubstr("(" + chart + ")"));  // embedded in the summary
  }
}

INSTANTIATE_TEST_SUITE_P(Bundled, BundledScenarioTest, ::testing::ValuesIn(BundledScenarios()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           std::replace(name.begin(), name.end(), '.', '_');
                           return name;
                         });

// Runs gpuslice-bench on a scenario written to a temporary file; returns (result, path).
std::pair<ProcessResult, std::string> RunOnText(const TempDir& dir, const std::string& text) {
  const std::string path = dir.path() + "/broken.yaml";
  std::ofstream(path) << text;
  return {Run({Bench(), "--sim", "--quick", "--report", dir.path() + "/report", path}), path};
}

constexpr char kValidTenants[] = R"(tenants:
  - name: a
    workload: {kind: compute, kernel_us: 1000}
)";

TEST(BenchScenariosTest, AMisspelledKeyIsRefusedNamingTheFileTheKeyAndTheValidKeys) {
  TempDir dir;
  const auto [r, path] = RunOnText(dir, R"(name: broken
description: a typo
duration: 5
modes: [unmanaged]
tenants:
  - name: a
    workload: {kind: compute, kernel_uss: 1000}
)");
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr(path));
  EXPECT_THAT(r.err, HasSubstr("tenants[0].workload"));
  EXPECT_THAT(r.err, HasSubstr("kernel_uss"));
  EXPECT_THAT(r.err, HasSubstr("kernel_us, depth"));  // what would have been valid
  EXPECT_FALSE(fs::exists(dir.path() + "/report")) << "nothing may run before the file is valid";
}

TEST(BenchScenariosTest, ABadValueIsRefusedNamingTheKeyTheValueAndTheValidRange) {
  TempDir dir;
  const auto [r, path] =
      RunOnText(dir,
                std::string("name: broken\ndescription: x\nduration: 5\nmodes: [gpuslice, gpu]\n") + kValidTenants);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr(path + ": modes[1]: expected one of solo, unmanaged, gpuslice, mps, mig, got 'gpu'"));

  const auto [q, quota_path] = RunOnText(dir, R"(name: broken
description: x
duration: 5
modes: [gpuslice]
tenants:
  - name: a
    workload: {kind: memory, chunk: 1Gi}
    memory_quota: lots
)");
  EXPECT_EQ(q.exit_code, 2);
  EXPECT_THAT(q.err, HasSubstr(quota_path + ": tenants[0].memory_quota: expected a byte quantity"));
  EXPECT_THAT(q.err, HasSubstr("got 'lots'"));
}

TEST(BenchScenariosTest, ABadTargetIsRefusedInOneLineNamingTheKey) {
  TempDir dir;
  const auto [r, path] = RunOnText(dir, std::string("name: broken\ndescription: x\nduration: 5\nmodes: [gpuslice]\n") +
                                            kValidTenants +
                                            "targets:\n  - {metric: share, tenant: a, at_most: 0.5, sorce: typo}\n");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr(path + ": targets[0]: unknown key 'sorce'; valid keys: metric, source, tenant"));
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_FALSE(fs::exists(dir.path() + "/report"));
}

TEST(BenchScenariosTest, MissingKeysAndDuplicateKeysAreRefused) {
  TempDir dir;
  const auto [r, path] = RunOnText(dir, std::string("name: broken\nduration: 5\nmodes: [solo]\n") + kValidTenants);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr(path + ": top level: missing key 'description'"));

  const auto [d, dup_path] = RunOnText(dir, std::string("name: broken\ndescription: x\nduration: 5\nduration: 6\n"
                                                        "modes: [solo]\n") +
                                                kValidTenants);
  EXPECT_EQ(d.exit_code, 2);
  EXPECT_THAT(d.err, HasSubstr(dup_path + ": line 4"));
  EXPECT_THAT(d.err, HasSubstr("'duration' is given twice"));
}

}  // namespace
}  // namespace gpuslice::testing
