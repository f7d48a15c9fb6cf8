// examples/: each example exercised where it can be, checked where it cannot.
//
// - the entrypoint wrapper (examples/container/gpuslice-entrypoint.sh), run with sh: --check,
//   LD_PRELOAD appended, bad values refused exactly as the shim refuses them, the state directory
//   and library checks, and that it really exec's the command under the preload (the sample
//   program, whose allocations the quota then refuses or allows);
// - the driver-API sample (vector_add_driver) on the simulated GPU and under the shim;
// - the Kubernetes manifests parse as YAML (python3-yaml) and carry what they must: the
//   GPUSLICE_* environment (valid for the wrapper), the hostPath mount of the state directory;
// - the Dockerfile copies paths that exist, and what it installs agrees with the wrapper.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/version.h"
#include "examples/sample/vector_add_kernel.h"
#include "gpuslice/sim_query.h"
#include "tests/support/shim_fixture.h"
#include "tests/support/subprocess.h"
#include "tests/support/test_env.h"

namespace gpuslice::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr int kWrapperConfigError = 2;
constexpr int kSampleOutOfMemory = 3;
constexpr char kPtxas[] = "/usr/local/cuda/bin/ptxas";

std::string Wrapper() { return SourceDir() + "/examples/container/gpuslice-entrypoint.sh"; }
std::string Sample() { return BinDir() + "/vector_add_driver"; }
std::string KubernetesDir() { return SourceDir() + "/examples/kubernetes"; }
// Another library already in LD_PRELOAD: one that exists and does nothing when loaded.
std::string OtherPreload() { return SimLibDir() + "/libnvidia-ml.so.1"; }

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in) << "cannot read " << path;
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

bool Exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

class ExamplesTest : public ShimTest {
 protected:
  void SetUp() override {
    ShimTest::SetUp();
    ASSERT_TRUE(Exists(Sample())) << Sample() << " is missing: build the vector_add_driver target";
    SetEnv("GPUSLICE_SIM_MEMORY", "16Gi");
  }

  // The wrapper, run by sh with the build's libgpuslice.so, the simulated driver on the library
  // path and this test's state directory, then `env` (a later entry wins).
  ProcessResult RunWrapper(const std::vector<std::string>& args, const std::vector<std::string>& env = {}) const {
    std::vector<std::string> argv = {"/bin/sh", Wrapper(), "--library", ShimPath()};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<std::string> full_env = {"LD_LIBRARY_PATH=" + SimLibDir(), "GPUSLICE_STATE_DIR=" + state_dir()};
    full_env.insert(full_env.end(), env.begin(), env.end());
    return gpuslice::testing::Run(argv, full_env, 60000);
  }

  // A command that leaves a file behind if it runs.
  std::vector<std::string> TouchCommand() const { return {"/bin/sh", "-c", "touch \"$0\"", Marker()}; }
  std::string Marker() const { return state_dir() + "/ran"; }
};

// --- The entrypoint wrapper ----------------------------------------------------------------

TEST_F(ExamplesTest, WrapperCheckPrintsWhatItWouldDoAndRunsNothing) {
  std::vector<std::string> args = {"--check", "--"};
  for (const auto& a : TouchCommand()) args.push_back(a);
  const ProcessResult r = RunWrapper(args, {"GPUSLICE_TENANT=team-a", "GPUSLICE_MEMORY_LIMIT=4Gi",
                                            "GPUSLICE_MEMORY_LIMIT_1=2Gi", "GPUSLICE_COMPUTE_REQUEST=30"});
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_THAT(r.out, HasSubstr("the configuration is valid; --check runs nothing"));
  EXPECT_THAT(r.out, HasSubstr("tenant:          team-a\n"));
  EXPECT_THAT(r.out, HasSubstr("memory limit:    4Gi\n"));
  EXPECT_THAT(r.out, HasSubstr("memory limit:    2Gi on device ordinal 1\n"));
  EXPECT_THAT(r.out, HasSubstr("compute request: 30\n"));
  EXPECT_THAT(r.out, HasSubstr("compute limit:   (unset: 100)\n"));
  EXPECT_THAT(r.out, HasSubstr("state directory: " + state_dir() + " (exists, writable"));
  EXPECT_THAT(r.out, HasSubstr("would set:       LD_PRELOAD=" + ShimPath() + "\n"));
  // Quoted as a shell would need it.
  EXPECT_THAT(r.out, HasSubstr("would exec:      /bin/sh -c 'touch \"$0\"' " + Marker() + "\n"));
  EXPECT_FALSE(Exists(Marker())) << "--check ran the command";
}

TEST_F(ExamplesTest, WrapperWarnsWhenNoTenantIsSet) {
  const ProcessResult r = RunWrapper({"--check", "true"});
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_THAT(r.err, HasSubstr("warning: GPUSLICE_TENANT is not set"));
  EXPECT_THAT(r.out, HasSubstr("tenant:          (unset: each process alone)"));
}

TEST_F(ExamplesTest, WrapperAppendsToAnExistingLdPreloadAndNeverReplacesIt) {
  const std::vector<std::string> print = {"/bin/sh", "-c", "printf '%s\\n' \"$LD_PRELOAD\""};
  const std::vector<std::string> tenant = {"GPUSLICE_TENANT=t"};
  auto with = [&](const std::string& preload) {
    std::vector<std::string> env = tenant;
    env.push_back("LD_PRELOAD=" + preload);
    return env;
  };

  ProcessResult r = RunWrapper(print, tenant);
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_EQ(r.out, ShimPath() + "\n");

  r = RunWrapper(print, with(OtherPreload()));
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_EQ(r.out, OtherPreload() + ":" + ShimPath() + "\n");

  // A space-separated list (ld.so accepts both separators) is kept as it is.
  r = RunWrapper(print, with(OtherPreload() + " " + OtherPreload()));
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_EQ(r.out, OtherPreload() + " " + OtherPreload() + ":" + ShimPath() + "\n");

  // Already there: not added twice.
  r = RunWrapper(print, with(ShimPath() + ":" + OtherPreload()));
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_EQ(r.out, ShimPath() + ":" + OtherPreload() + "\n");

  r = RunWrapper({"--check", "true"}, with(OtherPreload()));
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_THAT(r.out, HasSubstr("would set:       LD_PRELOAD=" + OtherPreload() + ":" + ShimPath() + "\n"));
}

TEST_F(ExamplesTest, WrapperExecsTheCommandItself) {
  // exec, not a child: the command has the wrapper's pid and its exit status is the container's.
  Subprocess p({"/bin/sh", Wrapper(), "--library", ShimPath(), "/bin/sh", "-c", "echo $$; exit 7"},
               {"GPUSLICE_STATE_DIR=" + state_dir(), "GPUSLICE_TENANT=t"});
  const ProcessResult r = p.Wait(60000);
  EXPECT_EQ(r.exit_code, 7) << Describe(r);
  EXPECT_EQ(r.out, std::to_string(p.pid()) + "\n");
}

TEST_F(ExamplesTest, WrapperRunsTheSampleUnderThePreloadWithinItsQuota) {
  // 3 vectors of 4 MiB in a 64 MiB quota: allowed, and cuMemGetInfo shows the quota, which only
  // the preloaded shim can have made it say.
  const ProcessResult r =
      RunWrapper({Sample(), "--elements", "1048576"}, {"GPUSLICE_TENANT=sample-a", "GPUSLICE_MEMORY_LIMIT=64Mi"});
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_THAT(r.out, HasSubstr("cuMemGetInfo before: free 67108864 B (64.00 MiB), total 67108864 B (64.00 MiB)"));
  EXPECT_THAT(r.out, HasSubstr("cuMemGetInfo after:  free 54525952 B (52.00 MiB), total 67108864 B (64.00 MiB)"));
  EXPECT_THAT(r.out, HasSubstr("done"));
}

TEST_F(ExamplesTest, WrapperRunsTheSampleUnderThePreloadBeyondItsQuota) {
  // In 8 MiB, a and b (4 MiB each) fit and c does not: the shim refuses it, as the driver would.
  const ProcessResult r =
      RunWrapper({Sample(), "--elements", "1048576"}, {"GPUSLICE_TENANT=sample-b", "GPUSLICE_MEMORY_LIMIT=8Mi"});
  EXPECT_EQ(r.exit_code, kSampleOutOfMemory) << Describe(r);
  EXPECT_THAT(r.out, HasSubstr("total 8388608 B (8.00 MiB)"));
  EXPECT_THAT(r.err, HasSubstr("vector_add_driver: cuMemAlloc(c) failed: CUDA_ERROR_OUT_OF_MEMORY"));
  EXPECT_EQ(TenantUsed("sample-b"), 0u) << "the exited process's charges went back";
}

struct BadValue {
  std::string name;
  std::string assignment;
  std::string message;  // part of the wrapper's message
};

std::ostream& operator<<(std::ostream& os, const BadValue& v) { return os << v.assignment; }

class WrapperRefusesTest : public ExamplesTest, public ::testing::WithParamInterface<BadValue> {};

TEST_P(WrapperRefusesTest, WithOneClearLineAndRunsNothing) {
  std::vector<std::string> args = TouchCommand();
  const ProcessResult r = RunWrapper(args, {"GPUSLICE_TENANT=t", GetParam().assignment});
  EXPECT_EQ(r.exit_code, kWrapperConfigError) << Describe(r);
  EXPECT_THAT(r.err, HasSubstr("gpuslice-entrypoint: error: " + GetParam().message));
  EXPECT_THAT(r.err, HasSubstr("problem(s) in the configuration; nothing was run"));
  EXPECT_FALSE(Exists(Marker())) << "the command ran despite the error";
}

INSTANTIATE_TEST_SUITE_P(
    BadValues, WrapperRefusesTest,
    ::testing::Values(
        BadValue{"MemoryLimitWithAWrongUnit", "GPUSLICE_MEMORY_LIMIT=4gb",
                 "invalid GPUSLICE_MEMORY_LIMIT='4gb'; expected a quantity above 0 (512Mi, 4Gi: powers of 1024; 4G: "
                 "powers of 1000, 4000000000 bytes; 1.5Gi, 4e9: any Kubernetes quantity of whole bytes) or a "
                 "percentage 1% to 100%, e.g. 4Gi"},
        BadValue{"MemoryLimitZero", "GPUSLICE_MEMORY_LIMIT=0", "invalid GPUSLICE_MEMORY_LIMIT='0'"},
        BadValue{"MemoryLimitOver100Percent", "GPUSLICE_MEMORY_LIMIT=150%", "invalid GPUSLICE_MEMORY_LIMIT='150%'"},
        BadValue{"MisspeltVariable", "GPUSLICE_MEMORY_LIMT=4Gi",
                 "unknown variable GPUSLICE_MEMORY_LIMT='4Gi'; did you mean GPUSLICE_MEMORY_LIMIT?"},
        BadValue{"OrdinalOutOfRange", "GPUSLICE_MEMORY_LIMIT_64=1Gi",
                 "unknown variable GPUSLICE_MEMORY_LIMIT_64='1Gi'"},
        BadValue{"RequestOver100", "GPUSLICE_COMPUTE_REQUEST=120",
                 "invalid GPUSLICE_COMPUTE_REQUEST='120'; expected a percentage from 1 to 100"},
        BadValue{"TenantWithASlash", "GPUSLICE_TENANT=team/a", "invalid GPUSLICE_TENANT='team/a'"},
        BadValue{"RelativeStateDir", "GPUSLICE_STATE_DIR=run/gpuslice",
                 "invalid GPUSLICE_STATE_DIR='run/gpuslice'; expected an absolute directory"}),
    [](const ::testing::TestParamInfo<BadValue>& info) { return info.param.name; });

TEST_F(ExamplesTest, WrapperRefusesARequestAboveTheLimit) {
  const ProcessResult r =
      RunWrapper({"true"}, {"GPUSLICE_TENANT=t", "GPUSLICE_COMPUTE_REQUEST=60", "GPUSLICE_COMPUTE_LIMIT=50"});
  EXPECT_EQ(r.exit_code, kWrapperConfigError) << Describe(r);
  EXPECT_THAT(r.err, HasSubstr("GPUSLICE_COMPUTE_REQUEST='60' above GPUSLICE_COMPUTE_LIMIT='50'"));
}

TEST_F(ExamplesTest, WrapperReportsEveryProblemAtOnce) {
  const ProcessResult r = RunWrapper({"--check", "true"}, {"GPUSLICE_TENANT=t", "GPUSLICE_MEMORY_LIMIT=lots",
                                                           "GPUSLICE_COMPUTE_LIMIT=0", "GPUSLICE_FOO=1"});
  EXPECT_EQ(r.exit_code, kWrapperConfigError) << Describe(r);
  EXPECT_THAT(r.err, HasSubstr("invalid GPUSLICE_MEMORY_LIMIT='lots'"));
  EXPECT_THAT(r.err, HasSubstr("invalid GPUSLICE_COMPUTE_LIMIT='0'"));
  EXPECT_THAT(r.err, HasSubstr("unknown variable GPUSLICE_FOO='1'"));
  EXPECT_THAT(r.err, HasSubstr("3 problem(s) in the configuration"));
  EXPECT_THAT(r.out, Not(HasSubstr("would exec")));
}

// The wrapper judges every value as the shim does: what it lets through the shim accepts, and
// what it refuses the shim would refuse (failing closed at cuInit) — checked against the shim
// itself, running the sample under the preload with the same variable.
TEST_F(ExamplesTest, WrapperAcceptsExactlyWhatTheShimAccepts) {
  const std::vector<std::string> assignments = {"GPUSLICE_MEMORY_LIMIT=4Gi",
                                                "GPUSLICE_MEMORY_LIMIT=512Mi",
                                                "GPUSLICE_MEMORY_LIMIT=4G",
                                                "GPUSLICE_MEMORY_LIMIT=4k",
                                                "GPUSLICE_MEMORY_LIMIT=1048576",
                                                "GPUSLICE_MEMORY_LIMIT=25%",
                                                "GPUSLICE_MEMORY_LIMIT=100%",
                                                "GPUSLICE_MEMORY_LIMIT=18446744073709551615",
                                                "GPUSLICE_MEMORY_LIMIT=00000000000000000001",
                                                "GPUSLICE_MEMORY_LIMIT=17179869183Gi",
                                                "GPUSLICE_MEMORY_LIMIT=18446744T",
                                                "GPUSLICE_MEMORY_LIMIT=0",
                                                "GPUSLICE_MEMORY_LIMIT=0Gi",
                                                "GPUSLICE_MEMORY_LIMIT=",
                                                "GPUSLICE_MEMORY_LIMIT=4gi",
                                                "GPUSLICE_MEMORY_LIMIT=4.5Gi",
                                                "GPUSLICE_MEMORY_LIMIT=Gi",
                                                "GPUSLICE_MEMORY_LIMIT=1KiB",
                                                "GPUSLICE_MEMORY_LIMIT=0%",
                                                "GPUSLICE_MEMORY_LIMIT=101%",
                                                "GPUSLICE_MEMORY_LIMIT=%",
                                                "GPUSLICE_MEMORY_LIMIT=18446744073709551616",
                                                "GPUSLICE_MEMORY_LIMIT=000000000000000000001",
                                                "GPUSLICE_MEMORY_LIMIT=17179869184Gi",
                                                "GPUSLICE_MEMORY_LIMIT=18446745T",
                                                "GPUSLICE_MEMORY_LIMIT= 4Gi",
                                                "GPUSLICE_MEMORY_LIMIT=+4Gi",
                                                "GPUSLICE_MEMORY_LIMIT=-4Gi",
                                                "GPUSLICE_MEMORY_LIMIT=-0",
                                                "GPUSLICE_MEMORY_LIMIT=1e9",
                                                "GPUSLICE_MEMORY_LIMIT=2E+9",
                                                "GPUSLICE_MEMORY_LIMIT=1000e-3",
                                                "GPUSLICE_MEMORY_LIMIT=1e-3",
                                                "GPUSLICE_MEMORY_LIMIT=1e19",
                                                "GPUSLICE_MEMORY_LIMIT=2e19",
                                                "GPUSLICE_MEMORY_LIMIT=1e99999999999999999999",
                                                "GPUSLICE_MEMORY_LIMIT=1e",
                                                "GPUSLICE_MEMORY_LIMIT=1.5Gi",
                                                "GPUSLICE_MEMORY_LIMIT=.5Ki",
                                                "GPUSLICE_MEMORY_LIMIT=0.3Ki",
                                                "GPUSLICE_MEMORY_LIMIT=4.",
                                                "GPUSLICE_MEMORY_LIMIT=.",
                                                "GPUSLICE_MEMORY_LIMIT=1.5",
                                                "GPUSLICE_MEMORY_LIMIT=100m",
                                                "GPUSLICE_MEMORY_LIMIT=1000m",
                                                "GPUSLICE_MEMORY_LIMIT=2P",
                                                "GPUSLICE_MEMORY_LIMIT=15Ei",
                                                "GPUSLICE_MEMORY_LIMIT=16Ei",
                                                "GPUSLICE_MEMORY_LIMIT=0.000000000000000001Ei",
                                                "GPUSLICE_MEMORY_LIMIT=18446744073709551615",
                                                "GPUSLICE_MEMORY_LIMIT_0=2Gi",
                                                "GPUSLICE_MEMORY_LIMIT_63=50%",
                                                "GPUSLICE_MEMORY_LIMIT_64=2Gi",
                                                "GPUSLICE_MEMORY_LIMIT_=2Gi",
                                                "GPUSLICE_MEMORY_LIMIT_x=2Gi",
                                                "GPUSLICE_MEMORY_LIMIT_1=0",
                                                "GPUSLICE_MEMORY_LIMITS=1Gi",
                                                "GPUSLICE_MEMORY_REQUEST=2Gi",
                                                "GPUSLICE_MEMORY_REQUEST=25%",
                                                "GPUSLICE_MEMORY_REQUEST=0",
                                                "GPUSLICE_MEMORY_REQUEST=4gi",
                                                "GPUSLICE_MEMORY_REQUEST_3=1Gi",
                                                "GPUSLICE_MEMORY_REQUEST_64=1Gi",
                                                "GPUSLICE_MEMORY_REQUST=1Gi",
                                                "GPUSLICE_TENANT=team-a.inference_1",
                                                "GPUSLICE_TENANT=",
                                                "GPUSLICE_TENANT=team a",
                                                "GPUSLICE_TENANT=" + std::string(63, 'a'),
                                                "GPUSLICE_TENANT=" + std::string(64, 'a'),
                                                "GPUSLICE_COMPUTE_REQUEST=30",
                                                "GPUSLICE_COMPUTE_REQUEST=30%",
                                                "GPUSLICE_COMPUTE_REQUEST=100",
                                                "GPUSLICE_COMPUTE_REQUEST=0",
                                                "GPUSLICE_COMPUTE_REQUEST=101",
                                                "GPUSLICE_COMPUTE_REQUEST=%",
                                                "GPUSLICE_COMPUTE_REQUEST=30%%",
                                                "GPUSLICE_COMPUTE_LIMIT=5",
                                                "GPUSLICE_COMPUTE_LIMIT=abc",
                                                "GPUSLICE_COMPUTE_CLASS=latency",
                                                "GPUSLICE_COMPUTE_CLASS=background",
                                                "GPUSLICE_COMPUTE_CLASS=fast",
                                                "GPUSLICE_COMPUTE_CLASS=",
                                                "GPUSLICE_DRIVER_LIBRARY=libcuda.so.1",
                                                "GPUSLICE_STATE_DIR=relative",
                                                "GPUSLICE_SIM_ANYTHING=1",
                                                "GPUSLICE_MEMORY_LIMT=1Gi",
                                                "GPUSLICE_FOO=1"};
  for (const std::string& assignment : assignments) {
    SCOPED_TRACE(assignment);
    const std::vector<std::string> env = {"GPUSLICE_TENANT=agree", assignment};
    const ProcessResult wrapper = RunWrapper({"--check", "true"}, env);
    ASSERT_TRUE(wrapper.exit_code == 0 || wrapper.exit_code == kWrapperConfigError) << Describe(wrapper);
    // Refused by the shim: cuInit fails with CUDA_ERROR_NOT_PERMITTED and the shim says why.
    // (A quota too small for the sample is an accepted value: that run ends out of memory.)
    const ProcessResult shim = RunShimmed({Sample(), "--elements", "16"}, env);
    const bool shim_refused = shim.exit_code == 1 && shim.err.find("CUDA_ERROR_NOT_PERMITTED") != std::string::npos &&
                              (shim.err.find("gpuslice: invalid") != std::string::npos ||
                               shim.err.find("gpuslice: unknown") != std::string::npos);
    ASSERT_TRUE(shim_refused || shim.exit_code == 0 || shim.exit_code == kSampleOutOfMemory) << Describe(shim);
    EXPECT_EQ(wrapper.exit_code == kWrapperConfigError, shim_refused) << "wrapper:\n"
                                                                      << Describe(wrapper) << "shim:\n"
                                                                      << Describe(shim);
  }
}

// The wrapper's list of the shim's variables (for its messages and suggestions) is the shim's.
TEST_F(ExamplesTest, WrapperKnowsEveryVariableTheShimReads) {
  const ProcessResult options = gpuslice::testing::Run({BinDir() + "/gpuslicectl", "options", "--markdown"});
  ASSERT_EQ(options.exit_code, 0) << Describe(options);
  std::set<std::string> shim;
  const std::regex row(R"(^\| `(GPUSLICE_[A-Z0-9_<>n]+)` \|)");
  for (const std::string& line : Lines(options.out)) {
    std::smatch m;
    if (std::regex_search(line, m, row)) shim.insert(m[1]);
  }
  ASSERT_FALSE(shim.empty()) << options.out;

  std::smatch m;
  const std::string script = ReadFile(Wrapper());
  ASSERT_TRUE(std::regex_search(script, m, std::regex(R"(\nknown_options="([^"]*)\")"))) << "no known_options= line";
  std::set<std::string> wrapper;
  std::istringstream words(m[1].str());
  for (std::string word; words >> word;) wrapper.insert(word);
  EXPECT_EQ(wrapper, shim);
}

TEST_F(ExamplesTest, WrapperRefusesAMissingStateDirectoryWithAClearMessage) {
  const std::string missing = state_dir() + "/not-mounted";
  // In a container (as Docker and Podman say it): the directory is the host's, to be mounted.
  const ProcessResult r =
      RunWrapper(TouchCommand(), {"GPUSLICE_TENANT=t", "GPUSLICE_STATE_DIR=" + missing, "container=docker"});
  EXPECT_EQ(r.exit_code, kWrapperConfigError) << Describe(r);
  EXPECT_THAT(r.err, HasSubstr("error: the state directory " + missing +
                               " (GPUSLICE_STATE_DIR) does not exist: mount "
                               "the node's shared state directory there"));
  EXPECT_THAT(r.err, HasSubstr("docker run -v /run/gpuslice:" + missing));
  EXPECT_THAT(r.err, HasSubstr("hostPath volume of type DirectoryOrCreate"));
  EXPECT_FALSE(Exists(missing)) << "the wrapper must not create it: a private directory would hide the others";
  EXPECT_FALSE(Exists(Marker()));
}

TEST_F(ExamplesTest, WrapperRefusesAStateDirectoryThatIsAFile) {
  const std::string file = state_dir() + "/a-file";
  std::ofstream(file) << "x";
  const ProcessResult r = RunWrapper({"true"}, {"GPUSLICE_TENANT=t", "GPUSLICE_STATE_DIR=" + file});
  EXPECT_EQ(r.exit_code, kWrapperConfigError) << Describe(r);
  EXPECT_THAT(r.err, HasSubstr("the state directory " + file + " (GPUSLICE_STATE_DIR) is not a directory"));
}

TEST_F(ExamplesTest, WrapperRefusesAStateDirectoryItCannotWrite) {
  std::vector<std::string> argv = {"/bin/sh", Wrapper(), "--library", ShimPath(), "true"};
  if (geteuid() == 0) {
    // root may write anywhere: the wrapper runs as nobody, to whom the directory (0700) is closed.
    const std::string setpriv = "/usr/bin/setpriv";
    if (!Exists(setpriv)) GTEST_SKIP() << "running as root, and " << setpriv << " is not installed";
    argv.insert(argv.begin(), {setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"});
  } else {
    ASSERT_EQ(chmod(state_dir().c_str(), 0500), 0);
  }
  const ProcessResult r = gpuslice::testing::Run(argv, {"GPUSLICE_STATE_DIR=" + state_dir(), "GPUSLICE_TENANT=t"});
  chmod(state_dir().c_str(), 0700);
  EXPECT_EQ(r.exit_code, kWrapperConfigError) << Describe(r);
  EXPECT_THAT(r.err, HasSubstr("the state directory " + state_dir() + " is not writable by uid"));
}

TEST_F(ExamplesTest, WrapperRefusesAMissingLibrary) {
  const ProcessResult r =
      gpuslice::testing::Run({"/bin/sh", Wrapper(), "--library", "/nonexistent/libgpuslice.so", "true"},
                             {"GPUSLICE_STATE_DIR=" + state_dir(), "GPUSLICE_TENANT=t"});
  EXPECT_EQ(r.exit_code, kWrapperConfigError) << Describe(r);
  EXPECT_THAT(r.err, HasSubstr("/nonexistent/libgpuslice.so is missing or unreadable: install libgpuslice.so there or "
                               "name it with --library PATH"));
}

// A library ld.so cannot preload is ignored with a line on stderr and the program runs
// unlimited: the wrapper tries the load first and refuses, naming the loader's reason.
TEST_F(ExamplesTest, WrapperRefusesALibraryThatCannotBePreloaded) {
  const std::string junk = state_dir() + "/libgpuslice.so";
  std::ofstream(junk) << "not a shared object\n";
  std::vector<std::string> args = {"--library", junk};
  for (const auto& a : TouchCommand()) args.push_back(a);
  const ProcessResult refused = RunWrapper(args, {"GPUSLICE_TENANT=t"});
  EXPECT_EQ(refused.exit_code, kWrapperConfigError) << Describe(refused);
  EXPECT_THAT(refused.err, HasSubstr("error: " + junk + " cannot be preloaded ("));
  EXPECT_THAT(refused.err, HasSubstr("): COMMAND would run without any limit"));
  EXPECT_FALSE(Exists(Marker())) << "the command ran without the library";
}

// Run by a relative path (bin/gpuslice-entrypoint from its prefix), the wrapper preloads its
// tree's library by an absolute path and says nothing of a --library it was never given.
TEST_F(ExamplesTest, TheBuiltWrapperRunByARelativePathPreloadsAnAbsolutePath) {
  const std::string prefix = std::filesystem::path(BinDir()).parent_path().string();
  for (const char* self : {"bin/gpuslice-entrypoint", "./bin/gpuslice-entrypoint"}) {
    SCOPED_TRACE(self);
    const ProcessResult r =
        gpuslice::testing::Run({"/bin/sh", "-c", "cd \"$0\" && exec \"$1\" --check true", prefix, self},
                               {"GPUSLICE_STATE_DIR=" + state_dir(), "GPUSLICE_TENANT=t"});
    EXPECT_EQ(r.exit_code, 0) << Describe(r);
    EXPECT_THAT(r.out, HasSubstr("would set:       LD_PRELOAD=" + prefix + "/lib/gpuslice/libgpuslice.so\n"));
    EXPECT_THAT(r.err, Not(HasSubstr("--library")));
  }
}

struct WrapperNearMiss {
  std::string name;
  std::string meant;
};

std::ostream& operator<<(std::ostream& os, const WrapperNearMiss& n) { return os << n.name; }

class WrapperNearMissTest : public ExamplesTest, public ::testing::WithParamInterface<WrapperNearMiss> {};

// GPU_SLICE_MEMORY_LIMIT=4Gi would run without a limit: refused as the shim refuses it (and as
// GPUSLICE_MEMORY_LIMT is), with one line naming it and what it likely meant; nothing runs.
TEST_P(WrapperNearMissTest, IsRefusedInOneLineNamingWhatItLikelyMeant) {
  const WrapperNearMiss& n = GetParam();
  const ProcessResult r = RunWrapper(TouchCommand(), {"GPUSLICE_TENANT=t", n.name + "=4Gi"});
  EXPECT_EQ(r.exit_code, kWrapperConfigError) << Describe(r);
  EXPECT_THAT(r.err, HasSubstr("gpuslice-entrypoint: error: unknown variable " + n.name + "='4Gi'; did you mean " +
                               n.meant + "? "));
  EXPECT_FALSE(Exists(Marker()));
}

INSTANTIATE_TEST_SUITE_P(Names, WrapperNearMissTest,
                         ::testing::Values(WrapperNearMiss{"GPU_SLICE_MEMORY_LIMIT", "GPUSLICE_MEMORY_LIMIT"},
                                           WrapperNearMiss{"gpuslice_memory_limit", "GPUSLICE_MEMORY_LIMIT"},
                                           WrapperNearMiss{"Gpu_Slice_Memory_Limit_1", "GPUSLICE_MEMORY_LIMIT_1"},
                                           WrapperNearMiss{"gpuslice_tenant", "GPUSLICE_TENANT"},
                                           WrapperNearMiss{"gpu_slice_memory_limt", "GPUSLICE_MEMORY_LIMIT"},
                                           WrapperNearMiss{"GPUSLICE_MEMORY_LIMT", "GPUSLICE_MEMORY_LIMIT"}),
                         [](const auto& info) { return info.param.name; });

TEST_F(ExamplesTest, WrapperSaysNothingOfNamesThatAreNotNearMisses) {
  const ProcessResult r = RunWrapper({"true"}, {"GPUSLICE_TENANT=t", "GPU_MEMORY=4Gi", "SLICE_LIMIT=1"});
  EXPECT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_THAT(r.err, Not(HasSubstr("is not read")));
}

TEST_F(ExamplesTest, WrapperUsageErrors) {
  ProcessResult r = RunWrapper({}, {"GPUSLICE_TENANT=t"});
  EXPECT_EQ(r.exit_code, kWrapperConfigError) << Describe(r);
  EXPECT_THAT(r.err, HasSubstr("error: no command to run"));

  r = RunWrapper({"--bogus", "true"}, {"GPUSLICE_TENANT=t"});
  EXPECT_EQ(r.exit_code, kWrapperConfigError) << Describe(r);
  EXPECT_THAT(r.err, HasSubstr("error: unknown option --bogus"));

  r = RunWrapper({"no-such-command-anywhere"}, {"GPUSLICE_TENANT=t"});
  EXPECT_EQ(r.exit_code, 127) << Describe(r);
  EXPECT_THAT(r.err, HasSubstr("error: command not found: no-such-command-anywhere"));

  r = RunWrapper({"--help"});
  EXPECT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_THAT(r.out,
              HasSubstr(
                  "usage: gpuslice-entrypoint [--check] [--library PATH] [--private-state] [--] COMMAND [ARG...]"));
}

// The usage names the built-in default, not the path --library was given.
TEST_F(ExamplesTest, WrapperUsageShowsTheRealDefaultLibrary) {
  ProcessResult r = RunWrapper({"--help"});  // RunWrapper passes --library <the build's library>
  EXPECT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_THAT(r.out, HasSubstr("(default /usr/local/lib/gpuslice/libgpuslice.so)"));
  EXPECT_THAT(r.out, Not(HasSubstr(ShimPath())));
  r = RunWrapper({"--bogus", "true"}, {"GPUSLICE_TENANT=t"});
  EXPECT_THAT(r.err, HasSubstr("(default /usr/local/lib/gpuslice/libgpuslice.so)"));
}

// The build's copy (<build>/bin/gpuslice-entrypoint) carries the project's version and, like an
// installed one, finds the library of its own tree (<build>/lib/gpuslice/libgpuslice.so).
TEST_F(ExamplesTest, TheBuiltWrapperHasTheProjectsVersionAndFindsItsLibrary) {
  const std::string built = BinDir() + "/gpuslice-entrypoint";
  ProcessResult r = gpuslice::testing::Run({built, "--version"});
  EXPECT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_EQ(r.out, std::string("gpuslice-entrypoint ") + GPUSLICE_VERSION + "\n");
  r = gpuslice::testing::Run({built, "--check", "true"}, {"GPUSLICE_STATE_DIR=" + state_dir(), "GPUSLICE_TENANT=t"});
  EXPECT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_THAT(r.out, HasSubstr("would set:       LD_PRELOAD=" + std::filesystem::path(BinDir()).parent_path().string() +
                               "/lib/gpuslice/libgpuslice.so\n"));
}

// A file where the directory should be: the hint mounts the default directory, never a
// directory over the file (`-v /run/gpuslice:/etc/hostname`).
TEST_F(ExamplesTest, WrapperHintForAStateDirectoryThatIsAFileNamesADirectory) {
  const std::string file = state_dir() + "/a-file";
  std::ofstream(file) << "x";
  const ProcessResult r = RunWrapper({"true"}, {"GPUSLICE_TENANT=t", "GPUSLICE_STATE_DIR=" + file});
  EXPECT_EQ(r.exit_code, kWrapperConfigError) << Describe(r);
  EXPECT_THAT(r.err, HasSubstr("set GPUSLICE_STATE_DIR to a directory (default /run/gpuslice)"));
  EXPECT_THAT(r.err, HasSubstr("docker run -v /run/gpuslice:/run/gpuslice"));
  EXPECT_THAT(r.err, Not(HasSubstr(":" + file)));
}

// A read-only mount is named as the cause, not the uid or the group (it is not writable for
// root either). Needs a mount namespace of its own (unshare -rm).
TEST_F(ExamplesTest, WrapperNamesAReadOnlyStateDirectoryMount) {
  if (gpuslice::testing::Run({"/usr/bin/unshare", "-rm", "true"}).exit_code != 0)
    GTEST_SKIP() << "no user and mount namespaces here (unshare -rm)";
  const ProcessResult r = gpuslice::testing::Run(
      {"/usr/bin/unshare", "-rm", "sh", "-c",
       "mount --bind \"$0\" \"$0\" && mount -o remount,ro,bind \"$0\" || exit 99; shift; exec \"$@\"", state_dir(),
       "/bin/sh", Wrapper(), "--library", ShimPath(), "true"},
      {"GPUSLICE_STATE_DIR=" + state_dir(), "GPUSLICE_TENANT=t"});
  ASSERT_NE(r.exit_code, 99) << Describe(r);
  EXPECT_EQ(r.exit_code, kWrapperConfigError) << Describe(r);
  EXPECT_THAT(r.err, HasSubstr("the state directory " + state_dir() + " is on a read-only mount (" + state_dir() +
                               "): the broker writes its state file there; mount the node's directory read-write"));
  EXPECT_THAT(r.err, Not(HasSubstr("not writable by uid")));
  EXPECT_THAT(r.err, Not(HasSubstr("mode 2770")));
}

// The wrapper as it runs on a host: /.dockerenv and /run/.containerenv hidden (a user and mount
// namespace binds /dev/null over them), `container` unset.
ProcessResult RunWrapperOnAHost(const std::string& state_dir, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {
      "/usr/bin/unshare",
      "-rm",
      "sh",
      "-c",
      "for f in /.dockerenv /run/.containerenv; do [ -e $f ] && { mount --bind /dev/null $f || exit 99; }; done; "
      "unset container KUBERNETES_SERVICE_HOST; exec \"$@\"",
      "sh",
      "/bin/sh",
      Wrapper(),
      "--library",
      ShimPath()};
  argv.insert(argv.end(), args.begin(), args.end());
  return gpuslice::testing::Run(argv, {"GPUSLICE_STATE_DIR=" + state_dir, "GPUSLICE_TENANT=t",
                                       "LD_LIBRARY_PATH=" + SimLibDir()});
}

// The README's first command on a host without the state directory: the line says how to prepare
// it on the host (the group, mode 2770), not how to mount it into a container.
TEST_F(ExamplesTest, WrapperOnAHostSaysHowToPrepareAMissingStateDirectory) {
  if (gpuslice::testing::Run({"/usr/bin/unshare", "-rm", "true"}).exit_code != 0)
    GTEST_SKIP() << "no user and mount namespaces here (unshare -rm)";
  const std::string missing = state_dir() + "/run-gpuslice";
  const ProcessResult r = RunWrapperOnAHost(missing, {"true"});
  ASSERT_NE(r.exit_code, 99) << Describe(r);
  EXPECT_EQ(r.exit_code, kWrapperConfigError) << Describe(r);
  EXPECT_THAT(r.err, HasSubstr("error: the state directory " + missing +
                               " (GPUSLICE_STATE_DIR) does not exist: "
                               "prepare it once for the group every tenant shares: sudo groupadd -f gpuslice && "
                               "sudo install -d -m 2770 -o root -g gpuslice " +
                               missing));
  EXPECT_THAT(r.err, Not(HasSubstr("docker run")));
}

// On a host the root file system is every process's: no warning for a state directory there
// (it came at every launch and could not be silenced). In a container one line, and
// --private-state (meant so) silences it.
TEST_F(ExamplesTest, WrapperWarnsOfAStateDirectoryOnTheRootFileSystemOnlyInAContainer) {
  const auto mount = gpuslice::testing::Run({"/usr/bin/stat", "-f", "-c", "%T", state_dir()});
  const auto root = gpuslice::testing::Run({"/usr/bin/stat", "-c", "%m", state_dir()});
  if (root.out != "/\n") GTEST_SKIP() << state_dir() << " is not on the root file system here (" << mount.out << ")";
  const std::string warning = "is on this container's own file system: only its processes share it";
  ProcessResult r = RunWrapper({"true"}, {"GPUSLICE_TENANT=t", "container=docker"});
  EXPECT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_THAT(r.err, HasSubstr(warning));
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "one line: " << r.err;
  r = RunWrapper({"--private-state", "true"}, {"GPUSLICE_TENANT=t", "container=docker"});
  EXPECT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_EQ(r.err, "") << "meant so: nothing to say";
  if (gpuslice::testing::Run({"/usr/bin/unshare", "-rm", "true"}).exit_code != 0)
    GTEST_SKIP() << "no user and mount namespaces here (unshare -rm)";
  r = RunWrapperOnAHost(state_dir(), {"true"});
  ASSERT_NE(r.exit_code, 99) << Describe(r);
  EXPECT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_THAT(r.err, Not(HasSubstr("file system"))) << "on a host, nothing to say";
}

TEST_F(ExamplesTest, WrapperIsPosixShell) {
  const std::string shellcheck = "/usr/bin/shellcheck";
  if (!Exists(shellcheck)) GTEST_SKIP() << shellcheck << " is not installed";
  const ProcessResult r = gpuslice::testing::Run({shellcheck, "--shell=sh", Wrapper()});
  EXPECT_EQ(r.exit_code, 0) << Describe(r);
}

// --- The sample program ----------------------------------------------------------------------

// Followed in order, the README installs the library before any command preloads it, prepares the
// host's state directory, and starts a tenant through the wrapper, which refuses a library the
// loader cannot preload (a preload of a path that is not there runs the program unlimited).
TEST(ExamplesReadme, InstallsBeforeItPreloadsAndStartsTenantsThroughTheWrapper) {
  const std::string readme = ReadFile(SourceDir() + "/README.md");
  const size_t installing = readme.find("\n## Installing\n");
  const size_t using_it = readme.find("\n## Using it\n");
  ASSERT_NE(installing, std::string::npos);
  ASSERT_NE(using_it, std::string::npos);
  EXPECT_LT(installing, using_it);
  const size_t first_preload = readme.find("LD_PRELOAD=");
  EXPECT_TRUE(first_preload == std::string::npos || first_preload > installing);
  // Its first step prepares the host's state directory as examples/systemd does at boot (the
  // first command failed on a host without it, and the advice was about containers); the tenant
  // is started after it.
  const size_t first_block = readme.find("```sh\n", using_it);
  const size_t block_end = readme.find("```\n", first_block + 6);
  EXPECT_THAT(readme.substr(first_block, block_end - first_block),
              HasSubstr("install -d -m 2770 -o root -g gpuslice /run/gpuslice"));
  const size_t second_block = readme.find("```sh\n", block_end);
  EXPECT_THAT(readme.substr(second_block, readme.find("```\n", second_block + 6) - second_block),
              HasSubstr("gpuslice-entrypoint python train.py"));
}

// The systemd example prepares the state directory for the group the exporter reads through: the
// directory the unit reads is created at boot 2770 root:<group>, the group exists, and the
// exporter's dynamic user is a member (it was not: the directory the shim creates is 0770 in the
// first tenant's group, and the exporter saw only gpuslice_segment_up 0).
TEST(ExamplesSystemd, TheExportersUnitReadsTheStateDirectoryThroughTheGroupItIsPrepared) {
  const std::string dir = SourceDir() + "/examples/systemd/";
  const std::string unit = ReadFile(dir + "gpuslice-exporter.service");
  const std::string tmpfiles = ReadFile(dir + "gpuslice-tmpfiles.conf");
  const std::string sysusers = ReadFile(dir + "gpuslice-sysusers.conf");
  EXPECT_THAT(tmpfiles, HasSubstr("\nd /run/gpuslice 2770 root gpuslice -\n"));
  EXPECT_THAT(sysusers, HasSubstr("\ng gpuslice -\n"));
  EXPECT_THAT(unit, HasSubstr("\nEnvironment=GPUSLICE_STATE_DIR=/run/gpuslice\n"));
  EXPECT_THAT(unit, HasSubstr("\nSupplementaryGroups=gpuslice video\n"));
  EXPECT_THAT(unit, HasSubstr("\nReadOnlyPaths=/run/gpuslice\n"));
  EXPECT_THAT(unit, HasSubstr("After=network.target systemd-tmpfiles-setup.service\n"));
}

TEST_F(ExamplesTest, SampleRunsOnTheSimulatedGpu) {
  const ProcessResult r = gpuslice::testing::Run({Sample(), "--elements", "4096"}, {"LD_LIBRARY_PATH=" + SimLibDir()});
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_THAT(r.out,
              HasSubstr("device 0: NVIDIA H100 80GB HBM3 (simulated), cuDeviceTotalMem 17179869184 B (16.00 GiB)"));
  EXPECT_THAT(r.out, HasSubstr("cuMemGetInfo before: free 17179869184 B (16.00 GiB), total 17179869184 B (16.00 GiB)"));
  EXPECT_THAT(r.out, HasSubstr("cuMemAlloc: 3 vectors of 4096 floats, 16384 B (0.02 MiB) each"));
  EXPECT_THAT(r.out, HasSubstr("copies: a and b round-tripped host -> device -> host intact"));
  EXPECT_THAT(r.out, HasSubstr("launch: vector_add<<<16, 256>>> over 4096 elements completed"));
  // The simulator runs no GPU code: the program says so rather than claim a result.
  EXPECT_THAT(r.out, HasSubstr("result: not checked: the simulated GPU does not execute kernels"));

  // The launch reached the driver: the simulator counted the sample's one kernel.
  simquery::Snapshot snapshot;
  std::string error;
  ASSERT_TRUE(simquery::TakeSnapshot(state_path(), &snapshot, &error)) << error;
  ASSERT_EQ(snapshot.devices.size(), 1u);
  uint64_t kernels = 0;
  for (const auto& p : snapshot.devices[0].processes) kernels += p.kernels;
  EXPECT_EQ(kernels, 1u);
}

// A simulated MIG instance is simulated too: it runs no kernels, and the sample says so rather
// than report every sum wrong (its name lacked the "(simulated)" its GPU's carries).
TEST_F(ExamplesTest, SampleRunsOnASimulatedMigInstance) {
  SetEnv("GPUSLICE_SIM_MODEL", "H200");
  SetEnv("GPUSLICE_SIM_MIG", "1g.18gb");
  const ProcessResult r = gpuslice::testing::Run({Sample(), "--elements", "4096"}, {"LD_LIBRARY_PATH=" + SimLibDir()});
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_THAT(r.out, HasSubstr("device 0: NVIDIA H200 MIG 1g.18gb (simulated), cuDeviceTotalMem"));
  EXPECT_THAT(r.out, HasSubstr("result: not checked: the simulated GPU does not execute kernels"));
}

TEST_F(ExamplesTest, SampleFailsOnAWrongResultFromADeviceThatIsNotSimulated) {
  // A device that does not call itself simulated must compute the sums; the simulator does not,
  // so under another name the sample must fail rather than pass unchecked.
  const ProcessResult r = gpuslice::testing::Run({Sample(), "--elements", "256"},
                                                 {"LD_LIBRARY_PATH=" + SimLibDir(), "GPUSLICE_SIM_NAME=Some GPU"});
  EXPECT_EQ(r.exit_code, 1) << Describe(r);
  EXPECT_THAT(r.err, HasSubstr("vector_add_driver: result: 256 of 256 sums wrong; first at 0"));
}

TEST_F(ExamplesTest, SampleRunsUnderTheShimAndHoldsItsMemoryInItsTenantsLedger) {
  auto p = StartShimmed({Sample(), "--elements", "1048576", "--hold", "60"},
                        {"GPUSLICE_TENANT=sample-tenant", "GPUSLICE_MEMORY_LIMIT=1Gi"});
  ASSERT_TRUE(p->WaitForOutput("holding 12582912 B (12.00 MiB) for 60 s", 30000)) << p->StdoutSoFar();
  EXPECT_EQ(TenantUsed("sample-tenant"), 12582912u);
  // What the walkthrough watches.
  const ProcessResult status =
      gpuslice::testing::Run({BinDir() + "/gpuslicectl", "status", "--state-dir", state_dir()});
  EXPECT_EQ(status.exit_code, 0) << Describe(status);
  EXPECT_THAT(status.out, HasSubstr("sample-tenant"));

  p->Kill(SIGTERM);  // ends the hold early; it frees and exits 0
  const ProcessResult r = p->Wait(30000);
  EXPECT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_THAT(r.out, HasSubstr("total 1073741824 B (1.00 GiB)"));
  EXPECT_THAT(r.out, HasSubstr("done"));
  EXPECT_EQ(TenantUsed("sample-tenant"), 0u);
}

TEST_F(ExamplesTest, SampleUsage) {
  ProcessResult r = gpuslice::testing::Run({Sample(), "--elements", "0"}, {"LD_LIBRARY_PATH=" + SimLibDir()});
  EXPECT_EQ(r.exit_code, 2) << Describe(r);
  EXPECT_THAT(r.err, HasSubstr("bad argument '0'"));
  r = gpuslice::testing::Run({Sample(), "--help"}, {"LD_LIBRARY_PATH=" + SimLibDir()});
  EXPECT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_THAT(r.out, HasSubstr("usage: vector_add_driver"));
  EXPECT_THAT(r.out, HasSubstr("--version"));
  r = gpuslice::testing::Run({Sample(), "--version"}, {"LD_LIBRARY_PATH=" + SimLibDir()});
  EXPECT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_EQ(r.out, std::string("vector_add_driver ") + GPUSLICE_VERSION + "\n");
}

// Linked with -lcuda but without a run path: the loader finds whichever libcuda.so.1 it would
// for any program, so the same binary runs on a real GPU.
TEST_F(ExamplesTest, SampleNeedsLibcudaAndHasNoRunPath) {
  const std::string readelf = "/usr/bin/readelf";
  if (!Exists(readelf)) GTEST_SKIP() << readelf << " is not installed";
  const ProcessResult r = gpuslice::testing::Run({readelf, "--dynamic", Sample()});
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_THAT(r.out, HasSubstr("Shared library: [libcuda.so.1]"));
  EXPECT_THAT(r.out, Not(HasSubstr("(RUNPATH)")));
  EXPECT_THAT(r.out, Not(HasSubstr("(RPATH)")));
}

TEST(ExamplesKernel, PtxasAcceptsTheSampleKernel) {
  if (!Exists(kPtxas)) GTEST_SKIP() << kPtxas << " not found: the CUDA toolkit's assembler is needed for this check";
  char pattern[] = "/tmp/gpuslice-examples-ptx-XXXXXX";
  ASSERT_NE(mkdtemp(pattern), nullptr);
  const std::string dir = pattern;
  std::ofstream(dir + "/vector_add.ptx") << examples::kVectorAddPtx;
  const ProcessResult r =
      gpuslice::testing::Run({kPtxas, "-arch=sm_90", dir + "/vector_add.ptx", "-o", dir + "/vector_add.cubin"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(Exists(dir + "/vector_add.cubin"));
  std::filesystem::remove_all(dir);
}

// --- The Kubernetes manifests ----------------------------------------------------------------

// Every document of a YAML file, as JSON (python3 with PyYAML does the parsing).
std::vector<Json> LoadYaml(const std::string& path) {
  const ProcessResult r =
      gpuslice::testing::Run({"/usr/bin/env", "python3", "-c",
                              "import json, sys, yaml\n"
                              "with open(sys.argv[1]) as f:\n"
                              "    print(json.dumps([d for d in yaml.safe_load_all(f) if d is not None]))\n",
                              path});
  EXPECT_EQ(r.exit_code, 0) << path << " does not parse as YAML (or python3-yaml is missing: "
                            << "scripts/install-deps.sh installs it):\n"
                            << r.err;
  if (r.exit_code != 0) return {};
  const Json documents = Json::parse(r.out, nullptr, /*allow_exceptions=*/false);
  EXPECT_TRUE(documents.is_array()) << r.out;
  return documents.is_array() ? documents.get<std::vector<Json>>() : std::vector<Json>{};
}

// The pod template of a Pod, Deployment or Job.
Json PodSpec(const Json& document) {
  const std::string kind = document.value("kind", "");
  if (kind == "Pod") return document.at("spec");
  return document.at("spec").at("template").at("spec");
}

// A container's literal GPUSLICE_* variables; every value must be a string.
std::map<std::string, std::string> GpusliceEnv(const Json& container) {
  std::map<std::string, std::string> env;
  for (const Json& e : container.value("env", Json::array())) {
    const std::string name = e.at("name");
    if (name.rfind("GPUSLICE_", 0) != 0) continue;
    EXPECT_TRUE(e.contains("value") && e.at("value").is_string())
        << name << " needs a literal string value (quote numbers: \"30\")";
    if (e.contains("value") && e.at("value").is_string()) env[name] = e.at("value").get<std::string>();
  }
  return env;
}

class ManifestTest : public ExamplesTest {
 protected:
  // Checks a container that runs under gpuslice: it starts through the entrypoint wrapper, its
  // GPUSLICE_* values pass the wrapper's --check, and the state directory it names is a
  // hostPath volume (DirectoryOrCreate) of the node's /run/gpuslice. Returns its environment.
  std::map<std::string, std::string> CheckGpusliceContainer(const Json& pod, const Json& container) {
    SCOPED_TRACE("container " + container.value("name", std::string("?")));
    const Json command = container.value("command", Json::array());
    EXPECT_TRUE(!command.empty() && command[0] == "/usr/local/bin/gpuslice-entrypoint")
        << "the container must start through the entrypoint wrapper: " << command.dump();
    EXPECT_TRUE(container.contains("args") && !container.at("args").empty()) << "no command for the wrapper to run";

    const auto env = GpusliceEnv(container);
    EXPECT_TRUE(env.count("GPUSLICE_TENANT")) << "no GPUSLICE_TENANT";
    EXPECT_TRUE(env.count("GPUSLICE_MEMORY_LIMIT")) << "no GPUSLICE_MEMORY_LIMIT";
    EXPECT_TRUE(env.count("GPUSLICE_COMPUTE_REQUEST")) << "no GPUSLICE_COMPUTE_REQUEST";
    const std::string state_dir_in_pod = env.count("GPUSLICE_STATE_DIR") ? env.at("GPUSLICE_STATE_DIR")
                                                                         : "/run/gpuslice";

    // The values, as the wrapper (and so the shim) judges them, with the state directory here.
    std::vector<std::string> assignments;
    for (const auto& [name, value] : env)
      if (name != "GPUSLICE_STATE_DIR") assignments.push_back(name + "=" + value);
    const ProcessResult check = RunWrapper({"--check", "true"}, assignments);
    EXPECT_EQ(check.exit_code, 0) << Describe(check);

    // The mount of the state directory, and the volume behind it.
    std::string volume_name;
    for (const Json& m : container.value("volumeMounts", Json::array()))
      if (m.value("mountPath", "") == state_dir_in_pod) volume_name = m.value("name", "");
    EXPECT_FALSE(volume_name.empty()) << "nothing is mounted at " << state_dir_in_pod;
    bool found = false;
    for (const Json& v : pod.value("volumes", Json::array())) {
      if (v.value("name", "") != volume_name) continue;
      found = true;
      EXPECT_TRUE(v.contains("hostPath")) << "the state directory must be the node's: " << v.dump();
      if (!v.contains("hostPath")) continue;
      EXPECT_EQ(v["hostPath"].value("path", ""), "/run/gpuslice");
      EXPECT_EQ(v["hostPath"].value("type", ""), "DirectoryOrCreate");
    }
    EXPECT_TRUE(found) << "no volume " << volume_name;

    // A GPU: the whole one, or a time-sliced replica of it.
    EXPECT_EQ(
        container.value("resources", Json::object()).value("limits", Json::object()).value("nvidia.com/gpu", Json()),
        Json(1))
        << container.value("resources", Json::object()).dump();
    return env;
  }
};

TEST_F(ManifestTest, EveryManifestParsesAsYaml) {
  std::set<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(KubernetesDir()))
    if (entry.path().extension() == ".yaml") files.insert(entry.path().filename().string());
  for (const char* expected :
       {"pod-gpuslice.yaml", "two-tenants.yaml", "pod-mig.yaml", "device-plugin-time-slicing.yaml"})
    EXPECT_TRUE(files.count(expected)) << expected << " is missing";
  for (const std::string& file : files) {
    SCOPED_TRACE(file);
    const auto documents = LoadYaml(KubernetesDir() + "/" + file);
    ASSERT_FALSE(documents.empty());
    for (const Json& d : documents) {
      EXPECT_TRUE(d.contains("apiVersion") && d.contains("kind") && d.contains("metadata")) << d.dump();
    }
  }
}

TEST_F(ManifestTest, PodHasLimitsTheStateDirectoryAndThePreload) {
  const auto documents = LoadYaml(KubernetesDir() + "/pod-gpuslice.yaml");
  ASSERT_EQ(documents.size(), 1u);
  ASSERT_EQ(documents[0].value("kind", ""), "Pod");
  const Json pod = PodSpec(documents[0]);
  ASSERT_EQ(pod.at("containers").size(), 1u);
  const auto env = CheckGpusliceContainer(pod, pod.at("containers")[0]);
  EXPECT_EQ(env.at("GPUSLICE_MEMORY_LIMIT"), "4Gi");
}

TEST_F(ManifestTest, TwoTenantsShareOneNodeAndItsStateDirectory) {
  const auto documents = LoadYaml(KubernetesDir() + "/two-tenants.yaml");
  std::map<std::string, Json> by_kind;
  for (const Json& d : documents) by_kind[d.value("kind", "")] = d;
  ASSERT_TRUE(by_kind.count("Deployment") && by_kind.count("Job")) << "expected a Deployment and a Job";

  const Json inference_pod = PodSpec(by_kind["Deployment"]);
  const Json training_pod = PodSpec(by_kind["Job"]);
  const auto inference = CheckGpusliceContainer(inference_pod, inference_pod.at("containers")[0]);
  const auto training = CheckGpusliceContainer(training_pod, training_pod.at("containers")[0]);
  EXPECT_EQ(inference.at("GPUSLICE_COMPUTE_REQUEST"), "60");
  EXPECT_EQ(inference.at("GPUSLICE_MEMORY_LIMIT"), "20Gi");
  EXPECT_EQ(training.at("GPUSLICE_COMPUTE_REQUEST"), "40");
  EXPECT_NE(inference.at("GPUSLICE_TENANT"), training.at("GPUSLICE_TENANT"));
  // The same node, hence the same GPU's broker.
  EXPECT_EQ(inference_pod.value("nodeSelector", Json()), training_pod.value("nodeSelector", Json()));
  EXPECT_FALSE(inference_pod.value("nodeSelector", Json::object()).empty());
}

TEST_F(ManifestTest, MigPodRequestsAMigDeviceAndNoSoftSlice) {
  const auto documents = LoadYaml(KubernetesDir() + "/pod-mig.yaml");
  ASSERT_EQ(documents.size(), 1u);
  const Json pod = PodSpec(documents[0]);
  for (const Json& container : pod.at("containers")) {
    const Json limits = container.value("resources", Json::object()).value("limits", Json::object());
    bool mig = false;
    for (const auto& item : limits.items())
      if (std::regex_match(item.key(), std::regex(R"(nvidia\.com/mig-[1-7]g\.[0-9]+gb)"))) mig = true;
    EXPECT_TRUE(mig) << "no nvidia.com/mig-<n>g.<m>gb resource: " << limits.dump();
    EXPECT_FALSE(limits.contains("nvidia.com/gpu"));
    EXPECT_TRUE(GpusliceEnv(container).empty()) << "a MIG instance is the isolation; no gpuslice limits";
  }
}

TEST_F(ManifestTest, TimeSlicingConfigGivesReplicasOfTheGpu) {
  const auto documents = LoadYaml(KubernetesDir() + "/device-plugin-time-slicing.yaml");
  ASSERT_EQ(documents.size(), 1u);
  ASSERT_EQ(documents[0].value("kind", ""), "ConfigMap");
  const Json data = documents[0].at("data");
  ASSERT_FALSE(data.empty());
  // The embedded device-plugin configuration is YAML too.
  char pattern[] = "/tmp/gpuslice-examples-config-XXXXXX";
  const int fd = mkstemp(pattern);
  ASSERT_GE(fd, 0);
  close(fd);
  std::ofstream(pattern) << data.begin().value().get<std::string>();
  const auto config = LoadYaml(pattern);
  unlink(pattern);
  ASSERT_EQ(config.size(), 1u);
  const Json resources = config[0].at("sharing").at("timeSlicing").at("resources");
  ASSERT_EQ(resources.size(), 1u);
  EXPECT_EQ(resources[0].value("name", ""), "nvidia.com/gpu");
  EXPECT_GE(resources[0].value("replicas", 0), 2);
}

// --- The Dockerfile ---------------------------------------------------------------------------

TEST(ExamplesDockerfile, CopiesPathsThatExistAndInstallsWhatTheWrapperExpects) {
  const std::string dockerfile = ReadFile(SourceDir() + "/examples/container/Dockerfile");
  const std::string build_dir = std::filesystem::path(BinDir()).parent_path().string();
  std::set<std::string> copied;
  std::set<std::string> installed;
  const std::regex copy(R"(^COPY\s+(.*)$)");
  for (const std::string& line : Lines(dockerfile)) {
    std::smatch m;
    if (!std::regex_match(line, m, copy)) continue;
    std::vector<std::string> words;
    std::string from;
    std::istringstream in(m[1].str());
    for (std::string w; in >> w;) {
      if (w.rfind("--from=", 0) == 0) from = w.substr(7);
      else if (w.rfind("--", 0) != 0) words.push_back(w);
    }
    ASSERT_GE(words.size(), 2u) << line;
    const std::string destination = words.back();
    words.pop_back();
    for (const std::string& source : words) {
      if (from.empty()) {
        // From the build context, the repository root.
        EXPECT_TRUE(Exists(SourceDir() + "/" + source)) << line << ": " << source << " is not in the repository";
        copied.insert(source);
      } else {
        // From the build stage: its Debian package (what cpack makes of this build, installed by
        // apt; tests/package/package_test.cc checks its contents), or outputs of its build tree.
        ASSERT_EQ(from, "build") << line;
        if (source == "/gpuslice.deb") {
          EXPECT_THAT(dockerfile, HasSubstr("cpack -G DEB && cp gpuslice_*.deb /gpuslice.deb"));
          EXPECT_THAT(dockerfile, HasSubstr("apt-get install -y --no-install-recommends " + destination));
          for (const char* path : {"/usr/local/lib/gpuslice/libgpuslice.so", "/usr/local/bin/gpuslicectl",
                                   "/usr/local/bin/gpuslice-entrypoint", "/usr/local/bin/gpuslice-workload",
                                   "/usr/local/bin/vector_add_driver"})
            installed.insert(path);
          continue;
        }
        ASSERT_EQ(source.rfind("/src/build/", 0), 0u) << line;
        EXPECT_TRUE(Exists(build_dir + "/" + source.substr(11))) << line << ": the build does not produce " << source;
      }
    }
    installed.insert(destination);
  }

  // Every directory the top-level CMakeLists.txt configures is in the build stage (tests and the
  // fuzzers, GPUSLICE_FUZZ, are off there).
  const std::string cmake = ReadFile(SourceDir() + "/CMakeLists.txt");
  const std::regex subdirectory(R"(add_subdirectory\((\w+)\))");
  for (auto it = std::sregex_iterator(cmake.begin(), cmake.end(), subdirectory); it != std::sregex_iterator(); ++it) {
    const std::string dir = (*it)[1];
    if (dir == "tests" || dir == "fuzz") continue;
    EXPECT_TRUE(copied.count(dir)) << "the Dockerfile does not copy " << dir << "/, which CMakeLists.txt configures";
  }
  for (const char* file : {"CMakeLists.txt", "cmake", "include", "examples"}) EXPECT_TRUE(copied.count(file)) << file;
  // The package installs where the image and every document say (the prefix and the layout).
  const std::string install = ReadFile(SourceDir() + "/cmake/Install.cmake");
  EXPECT_THAT(install, HasSubstr("\ninstall(TARGETS gpuslice LIBRARY DESTINATION lib/gpuslice COMPONENT node)\n"));
  EXPECT_THAT(install, HasSubstr("\nset(CPACK_PACKAGING_INSTALL_PREFIX /usr/local)\n"));

  // The library lands where the wrapper looks by default, and the wrapper is the entrypoint.
  EXPECT_TRUE(installed.count("/usr/local/lib/gpuslice/libgpuslice.so"));
  EXPECT_TRUE(installed.count("/usr/local/bin/gpuslicectl"));
  EXPECT_THAT(ReadFile(Wrapper()), HasSubstr("\nlibrary=/usr/local/lib/gpuslice/libgpuslice.so\n"));
  EXPECT_TRUE(installed.count("/usr/local/bin/gpuslice-entrypoint"));
  EXPECT_THAT(dockerfile, HasSubstr("\nENTRYPOINT [\"/usr/local/bin/gpuslice-entrypoint\"]\n"));
  // The state directory is the host's: the image must not bring one of its own.
  EXPECT_THAT(dockerfile, Not(HasSubstr("mkdir -p /run/gpuslice")));
}

}  // namespace
}  // namespace gpuslice::testing
