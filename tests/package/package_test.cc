// The Debian package, as a node would get it: cpack builds the .deb from this build tree, it is
// unpacked into a scratch root (dpkg-deb -x, no root needed) and used from there only: its
// gpuslicectl, its wrapper, and its libgpuslice.so preloaded over its simulated driver, whose
// quota refuses what the same program without the preload obtains. And every installed tool
// answers --version with the one version of CMakeLists.txt.
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/version.h"
#include "tests/support/subprocess.h"
#include "tests/support/test_env.h"

namespace gpuslice::testing {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using Json = nlohmann::json;

// Where the package installs (cmake/Install.cmake): the path every document names.
constexpr char kPrefix[] = "/usr/local";
constexpr char kLibrary[] = "/usr/local/lib/gpuslice/libgpuslice.so";

std::string BuildDir() { return fs::path(BinDir()).parent_path().string(); }

// The workload's result line (one JSON object a line); an empty object when there is none.
Json LastJsonLine(const std::string& out) {
  Json last = Json::object();
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    const Json event = Json::parse(line, nullptr, false);
    if (!event.is_discarded() && event.is_object() && event.value("event", "") == "result") last = event;
  }
  return last;
}

class PackageTest : public SimTest {
 protected:
  static void SetUpTestSuite() {
    char pattern[] = "/tmp/gpuslice-package-test-XXXXXX";
    scratch_ = new std::string(mkdtemp(pattern));
    // One test, so that the package is built once (about a minute on a loaded 2-core machine):
    // the package is built once per test process (cpack brings the build up to date, installs it
    // into a staging directory and archives it). Nothing here may throw or assert: a failure in
    // SetUpTestSuite would read as a skip; SetUp fails the test instead.
    const ProcessResult cpack = gpuslice::testing::Run({"/usr/bin/env", "cpack", "-G", "DEB", "--config",
                                                        BuildDir() + "/CPackConfig.cmake", "-B", *scratch_ + "/out"},
                                                       {}, 280000);
    cpack_log_ = new std::string(cpack.out + cpack.err);
    std::error_code error;
    for (const auto& entry : fs::directory_iterator(*scratch_ + "/out", error))
      if (entry.path().extension() == ".deb") deb_ = new std::string(entry.path().string());
    if (deb_) gpuslice::testing::Run({"/usr/bin/env", "dpkg-deb", "-x", *deb_, *scratch_ + "/root"});
  }
  static void TearDownTestSuite() { fs::remove_all(*scratch_); }

  void SetUp() override {
    SimTest::SetUp();
    ASSERT_NE(deb_, nullptr) << "cpack made no .deb:\n" << *cpack_log_;
  }

  static std::string Root() { return *scratch_ + "/root"; }
  static std::string Installed(const std::string& path) { return Root() + kPrefix + "/" + path; }

  static std::string* scratch_;
  static std::string* cpack_log_;
  static std::string* deb_;
};
std::string* PackageTest::scratch_ = nullptr;
std::string* PackageTest::cpack_log_ = nullptr;
std::string* PackageTest::deb_ = nullptr;

TEST_F(PackageTest, TheDebUnpackedIntoAScratchRootInstallsTheOneLayoutAndRuns) {
  const ProcessResult fields =
      gpuslice::testing::Run({"/usr/bin/env", "dpkg-deb", "-f", *deb_, "Package", "Version", "Depends"});
  ASSERT_EQ(fields.exit_code, 0) << fields.err;
  EXPECT_THAT(fields.out, HasSubstr("Package: gpuslice\n"));
  EXPECT_THAT(fields.out, HasSubstr(std::string("Version: ") + GPUSLICE_VERSION + "\n"));
  EXPECT_THAT(fields.out, HasSubstr("libfmt")) << "gpuslicectl needs the shared fmt library";
  // The description as written: three lines, no list separators from CMake.
  const ProcessResult description = gpuslice::testing::Run({"/usr/bin/env", "dpkg-deb", "-f", *deb_, "Description"});
  EXPECT_THAT(description.out, HasSubstr("quota and weighted share of compute time"));
  EXPECT_EQ(description.out.find("\n;"), std::string::npos) << description.out;
  EXPECT_EQ(description.out.find("\n ;"), std::string::npos) << description.out;
  for (const std::string path :
       {"lib/gpuslice/libgpuslice.so", "lib/gpuslice/sim/libcuda.so.1", "lib/gpuslice/sim/libnvidia-ml.so.1",
        "bin/gpuslicectl", "bin/gpuslice-entrypoint", "bin/gpuslice-sim", "bin/gpuslice-workload",
        "bin/vector_add_driver", "share/doc/gpuslice/README.md", "share/doc/gpuslice/docs/scheduling.md",
        "share/doc/gpuslice/help/gpuslicectl-status.txt", "share/doc/gpuslice/help/gpuslice-entrypoint.txt",
        "share/gpuslice/examples/kubernetes/two-tenants.yaml", "share/gpuslice/examples/container/Dockerfile"}) {
    EXPECT_TRUE(fs::exists(Installed(path))) << path;
  }
  EXPECT_THAT(std::string(kLibrary), StartsWith(kPrefix));
  EXPECT_FALSE(fs::exists(Installed("lib/gpuslice/sim/libcuda.so")))
      << "no development link: the simulated driver is for running, found only with LD_LIBRARY_PATH";
  std::ifstream help(Installed("share/doc/gpuslice/help/gpuslicectl-status.txt"));
  EXPECT_THAT(std::string(std::istreambuf_iterator<char>(help), {}), HasSubstr("HELD"));

  // Every installed tool answers --version with the project's version.
  for (const std::string tool : {"gpuslicectl", "gpuslice-entrypoint", "gpuslice-sim", "gpuslice-workload"}) {
    const ProcessResult r = gpuslice::testing::Run({Installed("bin/" + tool), "--version"});
    EXPECT_EQ(r.exit_code, 0) << tool << ": " << r.err;
    EXPECT_EQ(r.out, tool + " " + GPUSLICE_VERSION + "\n");
  }
  // The sample links the driver: with the packaged simulated one on the library path.
  const ProcessResult sample = gpuslice::testing::Run({Installed("bin/vector_add_driver"), "--version"},
                                                      {"LD_LIBRARY_PATH=" + Installed("lib/gpuslice/sim")});
  EXPECT_EQ(sample.exit_code, 0) << sample.err;
  EXPECT_EQ(sample.out, std::string("vector_add_driver ") + GPUSLICE_VERSION + "\n");
  // The build tree's own tools, not installed, say the same.
  for (const std::string tool : {"gpuslice-bench"}) {
    const ProcessResult r = gpuslice::testing::Run({BinDir() + "/" + tool, "--version"});
    EXPECT_EQ(r.exit_code, 0) << tool << ": " << r.err;
    EXPECT_EQ(r.out, tool + " " + GPUSLICE_VERSION + "\n");
  }

  const ProcessResult options = gpuslice::testing::Run({Installed("bin/gpuslicectl"), "options"});
  ASSERT_EQ(options.exit_code, 0) << options.err;
  EXPECT_THAT(options.out, StartsWith("GPUSLICE_MEMORY_LIMIT\n"));
  EXPECT_THAT(options.out, HasSubstr("GPUSLICE_COMPUTE_REQUEST\n"));

  // The packaged wrapper preloads the packaged library (found beside its bin/, so also under a
  // scratch root) over the packaged simulated driver: 6 chunks of 256 MiB against a 1 GiB quota
  // give 4; without the wrapper the same program obtains all 6.
  const std::string state_dir = *scratch_ + "/state";
  fs::create_directories(state_dir);
  const std::vector<std::string> env = {"LD_LIBRARY_PATH=" + Installed("lib/gpuslice/sim"),
                                        "GPUSLICE_STATE_DIR=" + state_dir, "GPUSLICE_TENANT=packaged",
                                        "GPUSLICE_MEMORY_LIMIT=1Gi"};
  const std::vector<std::string> workload = {
      Installed("bin/gpuslice-workload"), "memory", "--chunk", "256Mi", "--count", "6"};

  const ProcessResult check = gpuslice::testing::Run({Installed("bin/gpuslice-entrypoint"), "--check", "true"}, env);
  ASSERT_EQ(check.exit_code, 0) << check.err;
  EXPECT_THAT(check.out, HasSubstr("would set:       LD_PRELOAD=" + Root() + kLibrary + "\n"));

  std::vector<std::string> wrapped = {Installed("bin/gpuslice-entrypoint")};
  wrapped.insert(wrapped.end(), workload.begin(), workload.end());
  const ProcessResult under = gpuslice::testing::Run(wrapped, env);
  ASSERT_EQ(under.exit_code, 0) << under.err;
  const Json result = LastJsonLine(under.out);
  EXPECT_EQ(result.value("allocated", -1), 4) << under.out;
  EXPECT_EQ(result.value("refused", -1), 2) << under.out;

  const ProcessResult without = gpuslice::testing::Run(workload, env);  // control: no preload, no quota
  ASSERT_EQ(without.exit_code, 0) << without.err;
  EXPECT_EQ(LastJsonLine(without.out).value("allocated", -1), 6) << without.out;

  const ProcessResult status =
      gpuslice::testing::Run({Installed("bin/gpuslicectl"), "status", "--state-dir", state_dir});
  ASSERT_EQ(status.exit_code, 0) << status.err;
  EXPECT_THAT(status.out, HasSubstr("packaged"));
}

}  // namespace
}  // namespace gpuslice::testing
