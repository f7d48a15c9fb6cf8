// The image recipe (deploy/container/Dockerfile), checked without a container engine: it builds
// on Debian 12 and runs on Debian 12 slim; every Debian package it installs, and every one the
// gpuslice packages depend on, is in Debian 12; every program and library of the packages finds
// every library it needs in the packages apt brings for their Depends; and every path the
// manifests (deploy/kubernetes/, rendered) run or copy is in the packages. The packages are
// PackageBuild's (tests/CMakeLists.txt), as in package_test.cc.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/version.h"
#include "tests/support/kustomize.h"
#include "tests/support/subprocess.h"
#include "tests/support/test_env.h"

namespace gpuslice::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The Dockerfile with continued lines joined.
std::vector<std::string> Instructions() {
  std::vector<std::string> out;
  std::istringstream lines(ReadFile(SourceDir() + "/deploy/container/Dockerfile"));
  std::string current;
  for (std::string line; std::getline(lines, line);) {
    if (line.starts_with("#") || (current.empty() && line.empty())) continue;
    if (line.ends_with("\\")) {
      current += line.substr(0, line.size() - 1) + " ";
      continue;
    }
    out.push_back(current + line);
    current.clear();
  }
  return out;
}

// Package names of a Depends field.
std::vector<std::string> DependsNames(const std::string& depends) {
  std::vector<std::string> names;
  std::istringstream clauses(std::regex_replace(depends, std::regex(R"(\([^)]*\))"), ""));
  for (std::string clause; std::getline(clauses, clause, ',');) {
    std::istringstream alternatives(clause);
    for (std::string a; std::getline(alternatives, a, '|');) {
      a = std::regex_replace(a, std::regex(R"(^\s+|\s+$)"), "");
      if (!a.empty()) names.push_back(a);
    }
  }
  return names;
}

class PackageImageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string out = fs::path(BinDir()).parent_path().string() + "/package-test";
    std::error_code error;
    for (const auto& entry : fs::directory_iterator(out, error))
      if (entry.path().extension() == ".deb") debs_.push_back(entry.path());
    ASSERT_EQ(debs_.size(), 2u) << "the two packages in " << out << ": run `ctest -R PackageBuild`";
    char pattern[] = "/tmp/gpuslice-image-test-XXXXXX";
    root_ = mkdtemp(pattern);
    for (const auto& deb : debs_)
      ASSERT_EQ(gpuslice::testing::Run({"/usr/bin/env", "dpkg-deb", "-x", deb, root_}).exit_code, 0);
  }
  void TearDown() override { fs::remove_all(root_); }

  std::vector<std::string> debs_;
  std::string root_;
};

TEST_F(PackageImageTest, TheRecipeBuildsOnDebian12AndRunsOnDebian12SlimWithThePackages) {
  std::vector<std::string> bases;
  for (const auto& i : Instructions())
    if (i.starts_with("FROM ")) bases.push_back(i);
  ASSERT_GE(bases.size(), 2u);
  EXPECT_THAT(bases, ::testing::Contains(::testing::StartsWith("FROM debian:12 AS build")));
  EXPECT_EQ(bases.back(), "FROM debian:12-slim") << "the image that runs";
  const std::string last_stage =
      ReadFile(SourceDir() + "/deploy/container/Dockerfile")
          .substr(ReadFile(SourceDir() + "/deploy/container/Dockerfile").rfind("FROM debian:12-slim"));
  EXPECT_THAT(last_stage, ::testing::HasSubstr("apt-get install -y --no-install-recommends /tmp/debs/*.deb"));
  EXPECT_THAT(ReadFile(SourceDir() + "/deploy/container/Dockerfile"),
              ::testing::HasSubstr(std::string("-t gpuslice:") + GPUSLICE_VERSION + " ."))
      << "the tag the manifests name";
}

TEST_F(PackageImageTest, EveryDebianPackageTheImageInstallsIsInDebian12) {
  std::set<std::string> packages;
  for (const auto& i : Instructions()) {
    const auto at = i.find("apt-get install");
    if (at == std::string::npos) continue;
    std::istringstream words(i.substr(at + 15));
    for (std::string w; words >> w && w != "&&";)
      if (!w.starts_with("-") && w.find('/') == std::string::npos) packages.insert(w);
  }
  EXPECT_GE(packages.size(), 10u) << "the build stage's packages";
  for (const auto& deb : debs_) {
    const ProcessResult depends = gpuslice::testing::Run({"/usr/bin/env", "dpkg-deb", "-f", deb, "Depends"});
    for (const auto& name : DependsNames(depends.out))
      if (!name.starts_with("gpuslice")) packages.insert(name);
  }
  // One apt-cache call; its answer has a section per package, each starting "<name>:".
  std::vector<std::string> argv = {"/usr/bin/env", "apt-cache", "policy"};
  argv.insert(argv.end(), packages.begin(), packages.end());
  const ProcessResult policy = gpuslice::testing::Run(argv);
  std::map<std::string, std::string> sections;
  std::string current;
  std::istringstream lines(policy.out);
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty() && line[0] != ' ' && line.back() == ':') current = line.substr(0, line.size() - 1);
    else sections[current] += line + "\n";
  }
  for (const auto& p : packages) {
    EXPECT_THAT(sections[p], ::testing::HasSubstr(" bookworm"))
        << p << " is in no Debian 12 (bookworm) archive apt knows (apt-get update?):\n"
        << sections[p];
  }
}

TEST_F(PackageImageTest, EveryProgramFindsEveryLibraryInThePackagesItsDependsBring) {
  std::vector<std::string> argv = {"/usr/bin/env", "python3", SourceDir() + "/tests/package/deb_closure.py", root_};
  argv.insert(argv.end(), debs_.begin(), debs_.end());
  const ProcessResult r = gpuslice::testing::Run(argv);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.err, ::testing::ContainsRegex("checked [1-9][0-9]* ELF files"));
}

TEST_F(PackageImageTest, EveryPathTheManifestsRunOrCopyIsInThePackages) {
  int paths = 0;
  for (const char* overlay : {"overlays/device-plugin", "overlays/dra"}) {
    std::string error;
    const auto objects = RenderKustomization(SourceDir() + "/deploy/kubernetes/" + overlay, &error);
    ASSERT_TRUE(objects) << error;
    for (const auto& o : *objects) {
      if (!o.contains("spec") || !o["spec"].contains("template")) continue;
      for (const char* key : {"initContainers", "containers"}) {
        for (const auto& c : o["spec"]["template"]["spec"].value(key, json::array())) {
          for (const std::string word : c.value("command", json::array())) {
            // Every /usr/local path a command names, as a word or inside a shell line.
            std::smatch m;
            for (std::string rest = word; std::regex_search(rest, m, std::regex(R"(/usr/local/[A-Za-z0-9_./-]+)"));
                 rest = m.suffix()) {
              EXPECT_TRUE(fs::exists(root_ + m.str())) << overlay << " " << c["name"] << ": " << m.str();
              ++paths;
            }
          }
        }
      }
    }
  }
  EXPECT_GE(paths, 5);
}

}  // namespace
}  // namespace gpuslice::testing
