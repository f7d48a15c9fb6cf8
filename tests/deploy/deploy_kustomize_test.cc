// deploy/kubernetes/ as a kustomize tree: the base and both overlays render (with the tests'
// renderer, and with `kubectl kustomize` where kubectl is installed, which must give the same
// objects), and what they render agrees with the programs they run: one image name tagged with
// the project's version, each command an installed program of this build, every flag one of its
// flags, every key of the device plugin's config one of its keys, and the library at the one
// path every install keeps it (common/install_layout.h).
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "common/install_layout.h"
#include "common/version.h"
#include "tests/support/kustomize.h"
#include "tests/support/subprocess.h"
#include "tests/support/test_env.h"

namespace gpuslice::testing {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

const std::vector<std::string> kTrees = {"base", "overlays/device-plugin", "overlays/dra"};
constexpr char kImage[] = "gpuslice:" GPUSLICE_VERSION;

std::string Tree(const std::string& name) { return SourceDir() + "/deploy/kubernetes/" + name; }

json Render(const std::string& name) {
  std::string error;
  const auto objects = RenderKustomization(Tree(name), &error);
  EXPECT_TRUE(objects) << name << ": " << error;
  return objects ? *objects : json::array();
}

// Every container and init container of every pod template, as "<kind>/<name>: <container>".
std::vector<std::pair<std::string, json>> Containers(const json& objects) {
  std::vector<std::pair<std::string, json>> found;
  for (const auto& o : objects) {
    if (!o.contains("spec") || !o["spec"].contains("template")) continue;
    const json& spec = o["spec"]["template"]["spec"];
    for (const char* key : {"initContainers", "containers"}) {
      for (const auto& c : spec.value(key, json::array()))
        found.push_back({o["kind"].get<std::string>() + "/" + o["metadata"]["name"].get<std::string>() + ": " +
                             c["name"].get<std::string>(),
                         c});
    }
  }
  return found;
}

TEST(DeployKustomizeTest, EveryTreeRendersAndKubectlRendersTheSameObjects) {
  for (const std::string& name : kTrees) {
    const json objects = Render(name);
    EXPECT_FALSE(objects.empty()) << name;
    EXPECT_EQ(objects.at(0).value("kind", ""), "Namespace") << name << ": the namespace comes first";
    std::string error;
    const auto reference = KubectlKustomize(Tree(name), &error);
    if (!reference) {
      EXPECT_EQ(error, "") << name << ": kubectl refused what the renderer took";
      std::printf("%s: kubectl is not installed; rendered with tests/support/kustomize_render.py only\n", name.c_str());
      continue;
    }
    EXPECT_EQ(*reference, objects) << name << ": kubectl kustomize and the renderer differ";
  }
}

TEST(DeployKustomizeTest, BothOverlaysHoldTheBaseAndTheirOwnDaemon) {
  std::set<std::string> base;
  for (const auto& o : Render("base"))
    base.insert(o["kind"].get<std::string>() + "/" + o["metadata"]["name"].get<std::string>());
  EXPECT_TRUE(base.count("Namespace/gpuslice-system"));
  EXPECT_TRUE(base.count("DaemonSet/gpuslice-exporter"));
  for (const auto& [overlay, daemon] :
       std::vector<std::pair<std::string, std::string>>{{"overlays/device-plugin", "gpuslice-device-plugin"},
                                                        {"overlays/dra", "gpuslice-dra-driver"}}) {
    std::set<std::string> rendered;
    for (const auto& o : Render(overlay))
      rendered.insert(o["kind"].get<std::string>() + "/" + o["metadata"]["name"].get<std::string>());
    for (const auto& b : base) EXPECT_TRUE(rendered.count(b)) << overlay << " lacks the base's " << b;
    EXPECT_TRUE(rendered.count("DaemonSet/" + daemon)) << overlay;
  }
}

TEST(DeployKustomizeTest, EveryContainerRunsTheOneImageAndAnInstalledProgramWithItsOwnFlags) {
  std::map<std::string, std::string> help;  // program -> its --help
  int programs = 0;
  for (const std::string& name : kTrees) {
    for (const auto& [where, c] : Containers(Render(name))) {
      EXPECT_EQ(c.value("image", ""), kImage) << name << " " << where;
      const std::vector<std::string> command = c.value("command", std::vector<std::string>{});
      ASSERT_FALSE(command.empty()) << where;
      if (command[0] ==
          "sh") {  // the init containers copy the installed library, or the driver-limits hook, to the host
        const bool copies_installed = command.back().find(kInstalledLibrary) != std::string::npos ||
                                      command.back().find("cp /usr/local/bin/gpuslice-driver-limits ") == 0;
        EXPECT_TRUE(copies_installed) << where << ": " << command.back();
        continue;
      }
      ASSERT_TRUE(command[0].starts_with("/usr/local/bin/")) << where << ": " << command[0];
      const std::string program = command[0].substr(strlen("/usr/local/bin/"));
      if (!help.count(program)) {
        const ProcessResult r = gpuslice::testing::Run({BinDir() + "/" + program, "--help"});
        ASSERT_EQ(r.exit_code, 0) << where << ": " << program << " is not a program of this build: " << r.err;
        help[program] = r.out;
      }
      ++programs;
      for (size_t i = 1; i < command.size(); ++i) {
        const std::string& arg = command[i];
        if (!arg.starts_with("--")) continue;
        const std::string flag = arg.substr(0, arg.find('='));
        EXPECT_NE(help[program].find(flag), std::string::npos)
            << where << ": " << flag << " is not a flag of " << program;
        if (flag == "--container-library") {
          EXPECT_EQ(arg, flag + "=" + kInstalledLibrary) << where;
        }
      }
    }
  }
  EXPECT_GE(programs, 4);  // the exporter in each tree, the plugin, the driver
}

TEST(DeployKustomizeTest, DevicePluginConfigKeysAreThePluginsAndNameTheInstalledLibrary) {
  const json maps = ObjectsOfKind(Render("overlays/device-plugin"), "ConfigMap");
  ASSERT_EQ(maps.size(), 1u);
  const std::string text = maps[0]["data"]["config.yaml"];
  const ProcessResult parsed =
      gpuslice::testing::Run({"/usr/bin/env", "python3", "-c",
                              "import json, sys, yaml; print(json.dumps(yaml.safe_load(sys.argv[1])))", text});
  ASSERT_EQ(parsed.exit_code, 0) << parsed.err;
  const json config = json::parse(parsed.out);
  const ProcessResult help = gpuslice::testing::Run({BinDir() + "/gpuslice-device-plugin", "--help"});
  for (const auto& [key, value] : config.items()) {
    EXPECT_NE(help.out.find("config key " + key + "\n"), std::string::npos) << key << " is not a key of the plugin";
  }
  EXPECT_EQ(config.value("containerLibrary", ""), kInstalledLibrary);
}

// The control: the renderer refuses what kustomize refuses (a missing resource, an object given
// twice, an absolute path) and does not pass a field it does not implement.
TEST(DeployKustomizeTest, TheRendererRefusesWhatKustomizeRefuses) {
  const std::string dir = "/tmp/gs-kustomize-" + std::to_string(getpid());
  struct Case {
    std::string kustomization;
    std::string says;
  };
  const std::string base = fs::relative(Tree("base"), dir + "/k").string();
  for (const Case& c : std::vector<Case>{
           {"resources: [missing.yaml]\n", "does not exist"},
           {"resources: [" + base + ", " + base + "]\n", "twice"},
           {"resources: [" + Tree("base") + "]\n", "absolute"},
           {"resources: [" + base + "]\nnamePrefix: x-\n", "not supported"},
       }) {
    fs::create_directories(dir + "/k");
    std::ofstream(dir + "/k/kustomization.yaml") << c.kustomization;
    std::string error;
    EXPECT_FALSE(RenderKustomization(dir + "/k", &error)) << c.kustomization;
    EXPECT_NE(error.find(c.says), std::string::npos) << error;
    if (c.says != "not supported") {
      EXPECT_FALSE(KubectlKustomize(dir + "/k", &error)) << "kubectl took " << c.kustomization;
    }
    fs::remove_all(dir);
  }
}

}  // namespace
}  // namespace gpuslice::testing
