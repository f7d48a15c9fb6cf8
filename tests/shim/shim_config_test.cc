// Failing closed. A misconfigured shim must never mean an unlimited process: every GPUSLICE_*
// variable with a bad value, and any GPUSLICE_* variable the shim does not know (a misspelt
// GPUSLICE_MEMORY_LIMT must not silently mean "no limit"), makes cuInit fail with
// CUDA_ERROR_NOT_PERMITTED; stderr gets exactly one line naming the variable and its value with
// a valid example; no allocation succeeds, whichever way the program reaches the driver. So does
// a state directory that cannot be used or a segment that is corrupt, foreign or world-writable.
// And the valid spellings of each value are accepted.
#include <sys/stat.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "tests/support/shim_fixture.h"

namespace gpuslice::testing {
namespace {

using ::testing::HasSubstr;

struct BadSetting {
  std::string name;
  std::string value;
};

std::ostream& operator<<(std::ostream& os, const BadSetting& s) { return os << s.name << "='" << s.value << "'"; }

class ShimConfigTest : public ShimTest {
 protected:
  // The program's cuInit fails closed, with `line_has` in the shim's single line on stderr, and
  // every allocation is refused with `refusal`.
  void ExpectFailsClosed(const ProcessResult& r, const std::vector<std::string>& line_has,
                         const std::string& refusal = "CUDA_ERROR_NOT_PERMITTED") {
    EXPECT_EQ(r.exit_code, 3) << "cuInit must fail: " << Describe(r);
    const Json result = ResultOf(r);
    EXPECT_EQ(result.value("init", ""), "CUDA_ERROR_NOT_PERMITTED") << r.out;
    EXPECT_EQ(result.value("allocated", -1), 0) << r.out;
    // Refused by the shim, with the shim's code: not merely "nothing allocated".
    EXPECT_EQ(result["refusals"], Json({{refusal, 2}})) << r.out;
    const std::vector<std::string> lines = GpusliceLines(r.err);
    ASSERT_EQ(lines.size(), 1u) << "exactly one line from gpuslice:\n" << r.err;
    for (const std::string& text : line_has) EXPECT_THAT(lines[0], HasSubstr(text));
  }

  ProcessResult RunAlloc(const DriverPath& path, const std::vector<std::string>& env) {
    return RunShimmed(path.Command("alloc", {"--chunk", "256Mi", "--count", "2"}), env);
  }
};

class ShimBadSettingTest : public ShimConfigTest, public ::testing::WithParamInterface<BadSetting> {};

TEST_P(ShimBadSettingTest, FailsClosedWithOneLineNamingTheVariableTheValueAndAnExample) {
  const BadSetting& bad = GetParam();
  std::vector<std::string> env = {"GPUSLICE_MEMORY_LIMIT=1Gi", "GPUSLICE_TENANT=team"};
  env.push_back(bad.name + "=" + bad.value);  // last: overrides a valid one of the same name
  for (const DriverPath& path : {kDirect, kProcAddress}) {
    SCOPED_TRACE(path.name);
    const ProcessResult r = RunAlloc(path, env);
    if (path.app == "dlsym" && bad.name == "GPUSLICE_DRIVER_LIBRARY") {
      // Without a driver to load, cuGetProcAddress itself fails and the program never gets as
      // far as cuInit: closed as well, with the same single line.
      EXPECT_EQ(r.exit_code, 2) << Describe(r);
      const std::vector<std::string> lines = GpusliceLines(r.err);
      ASSERT_EQ(lines.size(), 1u) << r.err;
      EXPECT_THAT(lines[0], HasSubstr(bad.name + "='" + bad.value + "'"));
      continue;
    }
    // Whether or not a driver could be loaded (GPUSLICE_DRIVER_LIBRARY not an absolute path
    // loads none), the memory hooks refuse with the shim's code, as cuInit does.
    ExpectFailsClosed(r, {bad.name + "='" + bad.value + "'", "e.g."});
  }
  // Options are checked before the broker is attached: nothing was created.
  EXPECT_TRUE(StateDirEntries().empty());
}

INSTANTIATE_TEST_SUITE_P(
    EveryVariable, ShimBadSettingTest,
    ::testing::Values(BadSetting{"GPUSLICE_MEMORY_LIMIT", "lots"}, BadSetting{"GPUSLICE_MEMORY_LIMIT", "0"},
                      BadSetting{"GPUSLICE_MEMORY_LIMIT", "-1Gi"}, BadSetting{"GPUSLICE_MEMORY_LIMIT", "0%"},
                      BadSetting{"GPUSLICE_MEMORY_LIMIT", "101%"}, BadSetting{"GPUSLICE_MEMORY_LIMIT", "4GB"},
                      BadSetting{"GPUSLICE_MEMORY_LIMIT", ""}, BadSetting{"GPUSLICE_MEMORY_LIMIT_0", "lots"},
                      BadSetting{"GPUSLICE_MEMORY_LIMIT_0", "0"}, BadSetting{"GPUSLICE_MEMORY_LIMIT_x", "1Gi"},
                      BadSetting{"GPUSLICE_MEMORY_LIMIT_64", "1Gi"}, BadSetting{"GPUSLICE_TENANT", ""},
                      BadSetting{"GPUSLICE_TENANT", "team a"}, BadSetting{"GPUSLICE_TENANT", "team/a"},
                      BadSetting{"GPUSLICE_TENANT", std::string(64, 't')}, BadSetting{"GPUSLICE_STATE_DIR", ""},
                      BadSetting{"GPUSLICE_STATE_DIR", "relative/dir"},
                      BadSetting{"GPUSLICE_DRIVER_LIBRARY", "libcuda.so.1"}, BadSetting{"GPUSLICE_DRIVER_LIBRARY", ""},
                      BadSetting{"GPUSLICE_MEMORY_LIMT", "1Gi"}, BadSetting{"GPUSLICE_COMPUTE_CLASS", "fast"},
                      BadSetting{"GPUSLICE_COMPUTE_CLASS", ""}, BadSetting{"GPUSLICE_TENNANT", "team"},
                      BadSetting{"GPUSLICE_LIMIT", "1Gi"}),
    [](const auto& info) {
      std::string name = info.param.name.substr(9) + "_" + std::to_string(info.index);
      for (char& c : name) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
      return name;
    });

// GPUSLICE_DRIVER_LIBRARY is one option among the others: every variable is checked before a
// driver is looked for, so a typo is reported even when no driver can be loaded (before, the
// only line was "cannot load the CUDA driver" and the typo went unreported).
TEST_F(ShimConfigTest, ATypoIsReportedEvenWhenTheDriverCannotBeLoaded) {
  const ProcessResult r =
      RunAlloc(kDirect, {"GPUSLICE_DRIVER_LIBRARY=/nonexistent/libcuda.so.1", "GPUSLICE_MEMORY_LIMT=1Gi"});
  ExpectFailsClosed(r, {"unknown variable GPUSLICE_MEMORY_LIMT='1Gi'", "did you mean GPUSLICE_MEMORY_LIMIT?"});
  // Control: valid options and the same missing driver give the loader's line, not a typo's.
  const ProcessResult control = RunAlloc(kDirect, {"GPUSLICE_DRIVER_LIBRARY=/nonexistent/libcuda.so.1"});
  const std::vector<std::string> lines = GpusliceLines(control.err);
  ASSERT_EQ(lines.size(), 1u) << control.err;
  EXPECT_THAT(lines[0], HasSubstr("cannot load the CUDA driver /nonexistent/libcuda.so.1"));
}

TEST_F(ShimConfigTest, EveryComputeClassIsAcceptedAndAnyOtherFailsClosed) {
  for (const char* value : {"latency", "standard", "background"}) {
    const ProcessResult r = RunAlloc(kDirect, {std::string("GPUSLICE_COMPUTE_CLASS=") + value});
    EXPECT_EQ(r.exit_code, 0) << value << ": " << Describe(r);
    EXPECT_TRUE(GpusliceLines(r.err).empty()) << r.err;
  }
  ExpectFailsClosed(RunAlloc(kDirect, {"GPUSLICE_COMPUTE_CLASS=realtime"}),
                    {"invalid GPUSLICE_COMPUTE_CLASS='realtime'", "latency, standard or background"});
}

TEST_F(ShimConfigTest, ValidSpellingsOfEveryValueAreAccepted) {
  for (const std::vector<std::string>& env : std::vector<std::vector<std::string>>{
           {"GPUSLICE_MEMORY_LIMIT=1073741824"},
           {"GPUSLICE_MEMORY_LIMIT=1024Mi"},
           {"GPUSLICE_MEMORY_LIMIT=2G"},
           {"GPUSLICE_MEMORY_LIMIT=100%"},
           {"GPUSLICE_MEMORY_LIMIT=1%", "GPUSLICE_MEMORY_LIMIT_0=512Mi", "GPUSLICE_MEMORY_LIMIT_63=1Gi"},
           {"GPUSLICE_TENANT=Team-A.inference_2"},
           {"GPUSLICE_TENANT=" + std::string(63, 't')},
           {"GPUSLICE_DRIVER_LIBRARY=" + SimLibDir() + "/libcuda.so.1"},
           // The simulator's own variables share the prefix and are not the shim's business.
           {"GPUSLICE_SIM_KERNEL_NS=1000"},
       }) {
    SCOPED_TRACE(::testing::PrintToString(env));
    const ProcessResult r = RunAlloc(kDirect, env);
    EXPECT_EQ(r.exit_code, 0) << Describe(r);
    EXPECT_EQ(ResultOf(r).value("allocated", -1), 2) << r.out;
    EXPECT_TRUE(GpusliceLines(r.err).empty()) << r.err;
  }
}

TEST_F(ShimConfigTest, AStateDirectoryThatCannotBeCreatedIsRefused) {
  const std::string file = state_dir() + "/a-file";
  std::ofstream(file) << "not a directory";
  const std::string unusable = file + "/state";
  ExpectFailsClosed(RunAlloc(kDirect, {"GPUSLICE_STATE_DIR=" + unusable}), {unusable});
}

TEST_F(ShimConfigTest, AStateDirectoryThatCannotBeWrittenIsRefused) {
  const std::string locked = state_dir() + "/locked";
  ASSERT_EQ(mkdir(locked.c_str(), 0500), 0);
  std::vector<std::string> argv = kDirect.Command("alloc", {"--chunk", "256Mi", "--count", "2"});
  if (geteuid() == 0) {
    // Root writes into a mode 0500 directory anyway: the program runs as nobody, who may enter
    // the test's directory but not write into `locked` (as in CI, which runs as root).
    constexpr char kSetpriv[] = "/usr/bin/setpriv";
    if (access(kSetpriv, X_OK) != 0) GTEST_SKIP() << "running as root without " << kSetpriv << " to drop privileges";
    argv.insert(argv.begin(), {kSetpriv, "--reuid=65534", "--regid=65534", "--clear-groups"});
    ASSERT_EQ(chmod(state_dir().c_str(), 0755), 0);
  }
  ExpectFailsClosed(RunShimmed(argv, {"GPUSLICE_STATE_DIR=" + locked}), {locked});
}

TEST_F(ShimConfigTest, ACorruptSegmentIsRefusedAndLeftAlone) {
  // First a valid segment of the right size, then garbage over all of it.
  ASSERT_EQ(RunAlloc(kDirect, {}).exit_code, 0);
  const std::string segment = state_dir() + "/gpuslice.state";
  struct stat before {};
  ASSERT_EQ(stat(segment.c_str(), &before), 0);
  std::string garbage(static_cast<size_t>(before.st_size), '\0');
  std::mt19937 random(7);
  for (char& c : garbage) c = static_cast<char>(random());
  std::ofstream(segment, std::ios::binary | std::ios::trunc) << garbage;

  ExpectFailsClosed(RunAlloc(kDirect, {"GPUSLICE_MEMORY_LIMIT=1Gi"}), {segment});
  ExpectFailsClosed(RunAlloc(kProcAddress, {"GPUSLICE_MEMORY_LIMIT=1Gi"}), {segment});
  std::ifstream in(segment, std::ios::binary);
  const std::string after((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_TRUE(after == garbage) << "a refused segment must not be rewritten";
}

TEST_F(ShimConfigTest, ATruncatedSegmentIsRefused) {
  ASSERT_EQ(RunAlloc(kDirect, {}).exit_code, 0);
  const std::string segment = state_dir() + "/gpuslice.state";
  ASSERT_EQ(truncate(segment.c_str(), 4096), 0);
  ExpectFailsClosed(RunAlloc(kDirect, {"GPUSLICE_MEMORY_LIMIT=1Gi"}), {segment});
}

TEST_F(ShimConfigTest, AWorldWritableSegmentIsRefused) {
  ASSERT_EQ(RunAlloc(kDirect, {}).exit_code, 0);
  const std::string segment = state_dir() + "/gpuslice.state";
  ASSERT_EQ(chmod(segment.c_str(), 0666), 0);
  ExpectFailsClosed(RunAlloc(kDirect, {"GPUSLICE_MEMORY_LIMIT=1Gi"}), {segment, "world-writable"});
}

TEST_F(ShimConfigTest, TheSegmentIsCreatedWithoutAccessForOthers) {
  ASSERT_EQ(RunAlloc(kDirect, {"GPUSLICE_MEMORY_LIMIT=1Gi"}).exit_code, 0);
  struct stat segment {};
  ASSERT_EQ(stat((state_dir() + "/gpuslice.state").c_str(), &segment), 0);
  EXPECT_EQ(segment.st_mode & 0007, 0u) << std::oct << (segment.st_mode & 0777);
}

TEST_F(ShimConfigTest, AMissingStateDirectoryIsCreatedWithoutAccessForOthers) {
  const std::string fresh = state_dir() + "/new";
  const ProcessResult r = RunAlloc(kDirect, {"GPUSLICE_STATE_DIR=" + fresh, "GPUSLICE_MEMORY_LIMIT=1Gi"});
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_EQ(ResultOf(r).value("allocated", -1), 2) << r.out;
  struct stat dir {};
  ASSERT_EQ(stat(fresh.c_str(), &dir), 0);
  EXPECT_EQ(dir.st_mode & 0007, 0u) << std::oct << (dir.st_mode & 0777);
}

}  // namespace
}  // namespace gpuslice::testing
