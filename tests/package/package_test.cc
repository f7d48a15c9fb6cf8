// The Debian packages, as a node gets them. tests/package/build_packages.cmake (ctest's
// PackageBuild, once per run) makes them from this build tree with cpack; each test unpacks them
// into a scratch root (dpkg-deb -x, or dpkg --root to install and remove them) and uses them from
// there only: the packaged wrapper preloading the packaged library over the packaged simulated
// driver, whose quota refuses what the same program without the preload obtains; every program
// answering --version alone; the fields, licence and copyright of each package; the `gpuslice`
// group created on install and nothing left behind, and no warning, on removal.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/install_layout.h"
#include "common/version.h"
#include "tests/support/subprocess.h"
#include "tests/support/test_env.h"

namespace gpuslice::testing {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using Json = nlohmann::json;

// Where the packages install (cmake/Install.cmake): the path every document names.
constexpr char kPrefix[] = "/usr/local";

std::string BuildDir() { return fs::path(BinDir()).parent_path().string(); }

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

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

std::string Field(const std::string& deb, const std::string& field) {
  const ProcessResult r = gpuslice::testing::Run({"/usr/bin/env", "dpkg-deb", "-f", deb, field});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.out.empty() ? "" : r.out.substr(0, r.out.size() - 1);
}

class PackageTest : public SimTest {
 protected:
  void SetUp() override {
    SimTest::SetUp();
    const std::string out = BuildDir() + "/package-test";
    std::error_code error;
    for (const auto& entry : fs::directory_iterator(out, error)) {
      const std::string name = entry.path().filename();
      if (name.starts_with("gpuslice_") && name.ends_with(".deb")) node_deb_ = entry.path();
      if (name.starts_with("gpuslice-kubernetes_") && name.ends_with(".deb")) kubernetes_deb_ = entry.path();
    }
    ASSERT_FALSE(node_deb_.empty()) << "no gpuslice_*.deb in " << out << ": run `ctest -R PackageBuild` (ctest runs it "
                                    << "before these tests)";
    ASSERT_FALSE(kubernetes_deb_.empty()) << "no gpuslice-kubernetes_*.deb in " << out;
    char pattern[] = "/tmp/gpuslice-package-test-XXXXXX";
    scratch_ = mkdtemp(pattern);
  }
  void TearDown() override {
    fs::remove_all(scratch_);
    SimTest::TearDown();
  }

  // Both packages unpacked into <scratch>/root.
  void Unpack() {
    for (const std::string& deb : {node_deb_, kubernetes_deb_})
      ASSERT_EQ(gpuslice::testing::Run({"/usr/bin/env", "dpkg-deb", "-x", deb, Root()}).exit_code, 0) << deb;
  }
  std::string Root() const { return scratch_ + "/root"; }
  std::string Installed(const std::string& path) const { return Root() + kPrefix + "/" + path; }

  std::string scratch_, node_deb_, kubernetes_deb_;
};

TEST_F(PackageTest, TheNodePackageInstallsTheOneLayoutAndItsWrapperPreloadsItsLibrary) {
  ASSERT_NO_FATAL_FAILURE(Unpack());
  for (const std::string path :
       {"lib/gpuslice/libgpuslice.so", "lib/gpuslice/sim/libcuda.so.1", "lib/gpuslice/sim/libnvidia-ml.so.1",
        "bin/gpuslicectl", "bin/gpuslice-entrypoint", "bin/gpuslice-sim", "bin/gpuslice-workload",
        "bin/gpuslice-exporter", "bin/gpuslice-place", "bin/vector_add_driver", "share/doc/gpuslice/README.md",
        "share/doc/gpuslice/docs/scheduling.md", "share/doc/gpuslice/help/gpuslicectl-status.txt",
        "share/doc/gpuslice/help/gpuslice-entrypoint.txt", "share/gpuslice/examples/kubernetes/two-tenants.yaml",
        "share/gpuslice/examples/container/Dockerfile", "bin/gpuslice-device-plugin", "bin/gpuslice-dra-driver"}) {
    EXPECT_TRUE(fs::exists(Installed(path))) << path;
  }
  EXPECT_EQ(std::string(kPrefix) + "/lib/gpuslice/libgpuslice.so", kInstalledLibrary);
  EXPECT_FALSE(fs::exists(Installed("lib/gpuslice/sim/libcuda.so")))
      << "no development link: the simulated driver is for running, found only with LD_LIBRARY_PATH";
  EXPECT_THAT(ReadFile(Installed("share/doc/gpuslice/help/gpuslicectl-status.txt")), HasSubstr("HELD"));

  const ProcessResult options = gpuslice::testing::Run({Installed("bin/gpuslicectl"), "options"});
  ASSERT_EQ(options.exit_code, 0) << options.err;
  EXPECT_THAT(options.out, StartsWith("GPUSLICE_MEMORY_LIMIT\n"));
  EXPECT_THAT(options.out, HasSubstr("GPUSLICE_COMPUTE_REQUEST\n"));

  // The packaged wrapper preloads the packaged library (found beside its bin/, so also under a
  // scratch root) over the packaged simulated driver: 6 chunks of 256 MiB against a 1 GiB quota
  // give 4; without the wrapper the same program obtains all 6.
  const std::string state_dir = scratch_ + "/state";
  fs::create_directories(state_dir);
  const std::vector<std::string> env = {"LD_LIBRARY_PATH=" + Installed("lib/gpuslice/sim"),
                                        "GPUSLICE_STATE_DIR=" + state_dir, "GPUSLICE_TENANT=packaged",
                                        "GPUSLICE_MEMORY_LIMIT=1Gi"};
  const std::vector<std::string> workload = {
      Installed("bin/gpuslice-workload"), "memory", "--chunk", "256Mi", "--count", "6"};
  const ProcessResult check = gpuslice::testing::Run({Installed("bin/gpuslice-entrypoint"), "--check", "true"}, env);
  ASSERT_EQ(check.exit_code, 0) << check.err;
  EXPECT_THAT(check.out, HasSubstr("would set:       LD_PRELOAD=" + Root() + kInstalledLibrary + "\n"));

  std::vector<std::string> wrapped = {Installed("bin/gpuslice-entrypoint")};
  wrapped.insert(wrapped.end(), workload.begin(), workload.end());
  const ProcessResult under = gpuslice::testing::Run(wrapped, env);
  ASSERT_EQ(under.exit_code, 0) << under.err;
  EXPECT_EQ(LastJsonLine(under.out).value("allocated", -1), 4) << under.out;
  EXPECT_EQ(LastJsonLine(under.out).value("refused", -1), 2) << under.out;
  const ProcessResult without = gpuslice::testing::Run(workload, env);  // control: no preload, no quota
  ASSERT_EQ(without.exit_code, 0) << without.err;
  EXPECT_EQ(LastJsonLine(without.out).value("allocated", -1), 6) << without.out;

  const ProcessResult status =
      gpuslice::testing::Run({Installed("bin/gpuslicectl"), "status", "--state-dir", state_dir});
  ASSERT_EQ(status.exit_code, 0) << status.err;
  EXPECT_THAT(status.out, HasSubstr("packaged"));
}

TEST_F(PackageTest, EveryInstalledProgramAnswersVersionWithNoOtherArgument) {
  ASSERT_NO_FATAL_FAILURE(Unpack());
  int programs = 0;
  for (const auto& entry : fs::directory_iterator(Installed("bin"))) {
    const std::string tool = entry.path().filename();
    // The sample links the driver: with the packaged simulated one on the library path.
    const ProcessResult r = gpuslice::testing::Run({entry.path().string(), "--version"},
                                                   {"LD_LIBRARY_PATH=" + Installed("lib/gpuslice/sim")});
    EXPECT_EQ(r.exit_code, 0) << tool << ": " << r.err;
    EXPECT_EQ(r.out, tool + " " + GPUSLICE_VERSION + "\n") << tool;
    ++programs;
  }
  EXPECT_EQ(programs, 10);
  // The build tree's own tool, not installed, says the same.
  const ProcessResult bench = gpuslice::testing::Run({BinDir() + "/gpuslice-bench", "--version"});
  EXPECT_EQ(bench.out, std::string("gpuslice-bench ") + GPUSLICE_VERSION + "\n") << bench.err;
}

TEST_F(PackageTest, EachPackageNamesARealMaintainerItsDependenciesAndItsLicence) {
  ASSERT_NO_FATAL_FAILURE(Unpack());
  const std::string licence = ReadFile(SourceDir() + "/LICENSE");
  ASSERT_THAT(licence, HasSubstr("Apache License\n                           Version 2.0, January 2004"));
  const std::regex maintainer(R"(^[^<>@]+ <[^<>@\s]+@([a-z0-9-]+\.)+[a-z]{2,}>$)");
  for (const auto& [deb, package] :
       std::vector<std::pair<std::string, std::string>>{{node_deb_, "gpuslice"},
                                                        {kubernetes_deb_, "gpuslice-kubernetes"}}) {
    EXPECT_EQ(Field(deb, "Package"), package);
    EXPECT_EQ(Field(deb, "Version"), GPUSLICE_VERSION);
    const std::string who = Field(deb, "Maintainer");
    EXPECT_TRUE(std::regex_match(who, maintainer)) << package << ": Maintainer '" << who << "'";
    EXPECT_THAT(who, ::testing::Not(::testing::AnyOf(HasSubstr("localhost"), HasSubstr("example"))));
    const std::string copyright = ReadFile(Root() + "/usr/share/doc/" + package + "/copyright");
    EXPECT_THAT(copyright, HasSubstr("License: Apache-2.0")) << package;
    EXPECT_THAT(copyright, HasSubstr("/usr/share/common-licenses/Apache-2.0")) << package;
    EXPECT_EQ(ReadFile(Installed("share/doc/" + package + "/LICENSE")), licence) << package;
    // dpkg would take the package for the owner of /usr/local's directories (and warn, or delete
    // them, on removal): the package lists none of them.
    const ProcessResult contents = gpuslice::testing::Run({"/usr/bin/env", "dpkg-deb", "-c", deb});
    for (const char* shared :
         {" ./usr/local/\n", " ./usr/local/bin/\n", " ./usr/local/lib/\n", " ./usr/local/share/\n"})
      EXPECT_THAT(contents.out, ::testing::Not(HasSubstr(shared))) << package << " owns" << shared;
  }
  const std::string node_depends = Field(node_deb_, "Depends");
  for (const char* needed : {"libfmt", "libstdc++6", "passwd"}) EXPECT_THAT(node_depends, HasSubstr(needed));
  const std::string k8s_depends = Field(kubernetes_deb_, "Depends");
  for (const std::string& needed : {std::string("gpuslice (= ") + GPUSLICE_VERSION + ")", std::string("libgrpc++"),
                                    std::string("libprotobuf"), std::string("libyaml-cpp")})
    EXPECT_THAT(k8s_depends, HasSubstr(needed));
  // The description as written: several lines, no list separators from CMake.
  const std::string description = Field(node_deb_, "Description");
  EXPECT_THAT(description, HasSubstr("quota and weighted share of compute time"));
  EXPECT_EQ(description.find("\n;"), std::string::npos) << description;
}

// dpkg itself, into a scratch root (its own database; the maintainer scripts run outside a
// chroot with DPKG_ROOT set, which the postinst honours). Installing creates the gpuslice group;
// removing and purging both packages leaves nothing of theirs, keeps another program's file in
// /usr/local/bin, and prints no warning.
TEST_F(PackageTest, InstallingCreatesTheGpusliceGroupAndRemovalLeavesNothingBehind) {
  if (geteuid() != 0) GTEST_SKIP() << "dpkg --root needs root";
  const std::string root = Root();
  for (const char* dir : {"/var/lib/dpkg/info", "/var/lib/dpkg/updates", "/etc", "/usr/local/bin"})
    fs::create_directories(root + dir);
  std::ofstream(root + "/var/lib/dpkg/status") << "";
  std::ofstream(root + "/var/lib/dpkg/available") << "";
  std::ofstream(root + "/etc/group") << "root:x:0:\n";
  std::ofstream(root + "/etc/gshadow") << "root:*::\n";
  std::ofstream(root + "/etc/passwd") << "root:x:0:0:root:/root:/bin/sh\n";
  std::ofstream(root + "/usr/local/bin/someone-else") << "#!/bin/sh\n";
  const std::vector<std::string> dpkg = {"/usr/bin/env",    "dpkg",
                                         "--root=" + root,  "--force-script-chrootless",
                                         "--force-depends", "--log=/dev/null"};
  std::vector<std::string> install = dpkg;
  install.insert(install.end(), {"--install", node_deb_, kubernetes_deb_});
  const ProcessResult installed = gpuslice::testing::Run(install);
  ASSERT_EQ(installed.exit_code, 0) << installed.out << installed.err;
  EXPECT_THAT(ReadFile(root + "/etc/group"), HasSubstr("\ngpuslice:x:")) << "the postinst creates the group";
  EXPECT_TRUE(fs::exists(root + kInstalledLibrary));

  std::vector<std::string> purge = dpkg;
  purge.insert(purge.end(), {"--purge", "gpuslice-kubernetes", "gpuslice"});
  const ProcessResult purged = gpuslice::testing::Run(purge);
  ASSERT_EQ(purged.exit_code, 0) << purged.out << purged.err;
  EXPECT_THAT(purged.out + purged.err, ::testing::Not(HasSubstr("warning"))) << purged.out << purged.err;
  EXPECT_TRUE(fs::exists(root + "/usr/local/bin/someone-else")) << "another program's file is kept";
  std::vector<std::string> left;
  for (const auto& entry : fs::recursive_directory_iterator(root + "/usr")) {
    const std::string path = entry.path().string().substr(root.size());
    if (path.find("gpuslice") != std::string::npos) left.push_back(path);
  }
  EXPECT_THAT(left, ::testing::IsEmpty());
  EXPECT_THAT(ReadFile(root + "/etc/group"), HasSubstr("\ngpuslice:x:")) << "a system group is kept on purge";
}

}  // namespace
}  // namespace gpuslice::testing
