// The device plugin's manifests (deploy/kubernetes/) parse as YAML (python3-yaml) and agree
// with the plugin: the DaemonSet's config is one the plugin accepts, its volumes put the
// device-plugins directory and the library where the config says, and the pods ask for the
// resources the config advertises.
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "tests/support/subprocess.h"
#include "tests/support/test_env.h"

namespace gpuslice::testing {
namespace {

using nlohmann::json;

std::string Manifest(const std::string& name) { return SourceDir() + "/deploy/kubernetes/" + name; }

// Every document of a YAML file, as JSON.
json LoadYaml(const std::string& path) {
  const auto r = Run({"/usr/bin/env", "python3", "-c",
                      "import json, sys, yaml\n"
                      "with open(sys.argv[1]) as f:\n"
                      "    print(json.dumps([d for d in yaml.safe_load_all(f) if d is not None]))\n",
                      path});
  EXPECT_EQ(r.exit_code, 0) << path << " does not parse as YAML: " << r.err;
  return r.exit_code == 0 ? json::parse(r.out) : json::array();
}

json Find(const json& documents, const std::string& kind) {
  for (const auto& d : documents) {
    if (d.at("kind") == kind) return d;
  }
  ADD_FAILURE() << "no " << kind;
  return json::object();
}

// `gpuslice-device-plugin --check-config` over a config text.
ProcessResult CheckConfig(const std::string& text) {
  const std::string path = "/tmp/gsdp-config-" + std::to_string(getpid()) + ".yaml";
  std::ofstream(path) << text;
  auto result = Run({BinDir() + "/gpuslice-device-plugin", "--check-config", "--config", path});
  unlink(path.c_str());
  return result;
}

json ParseYamlText(const std::string& text) {
  const std::string path = "/tmp/gsdp-text-" + std::to_string(getpid()) + ".yaml";
  std::ofstream(path) << text;
  auto documents = LoadYaml(path);
  unlink(path.c_str());
  return documents.at(0);
}

TEST(DevicePluginManifestsTest, DaemonSetConfigIsOneThePluginAcceptsAndItsVolumesMatchIt) {
  const auto documents = LoadYaml(Manifest("gpuslice-device-plugin.yaml"));
  const std::string config_text = Find(documents, "ConfigMap").at("data").at("config.yaml");
  const auto checked = CheckConfig(config_text);
  EXPECT_EQ(checked.exit_code, 0) << checked.err;
  const json config = ParseYamlText(config_text);

  const auto pod = Find(documents, "DaemonSet").at("spec").at("template").at("spec");
  std::map<std::string, std::string> host_paths;
  for (const auto& v : pod.at("volumes")) {
    if (v.contains("hostPath")) host_paths[v.at("name")] = v.at("hostPath").at("path");
  }
  const auto& plugin = pod.at("containers").at(0);
  std::map<std::string, std::string> mounted_from;  // container path -> host path
  for (const auto& m : plugin.at("volumeMounts")) {
    if (host_paths.contains(m.at("name"))) mounted_from[m.at("mountPath")] = host_paths[m.at("name")];
  }
  const std::string plugin_dir = config.at("pluginDir");
  EXPECT_EQ(mounted_from[plugin_dir], plugin_dir) << "the kubelet's directory, at the same path";
  const std::string library = config.at("library");
  const std::string library_dir = library.substr(0, library.rfind('/'));
  EXPECT_EQ(mounted_from[library_dir], library_dir) << "the library is checked at its host path";
  EXPECT_EQ(host_paths.count("gpuslice-state"), 1u);
  EXPECT_EQ(host_paths["gpuslice-state"], config.at("stateDir"));
  // The init container installs the library into the volume the config names.
  const auto& init = pod.at("initContainers").at(0);
  EXPECT_EQ(host_paths[init.at("volumeMounts").at(0).at("name")], library_dir);
  EXPECT_NE(init.at("command").dump().find("libgpuslice.so"), std::string::npos);
}

TEST(DevicePluginManifestsTest, PodExampleAsksForEightGibAndThirtyPercent) {
  const auto daemonset = LoadYaml(Manifest("gpuslice-device-plugin.yaml"));
  const json config = ParseYamlText(Find(daemonset, "ConfigMap").at("data").at("config.yaml"));
  const auto pod = Find(LoadYaml(Manifest("pod-gpu-slice.yaml")), "Pod");
  const auto& limits = pod.at("spec").at("containers").at(0).at("resources").at("limits");
  EXPECT_EQ(limits.at(config.at("memoryResource").get<std::string>()), 8);
  EXPECT_EQ(limits.at(config.at("computeResource").get<std::string>()), 30);
}

TEST(DevicePluginManifestsTest, MigExampleLeavesTheMigGpuToNvidiasPlugin) {
  const auto documents = LoadYaml(Manifest("pod-mig-slice.yaml"));
  ASSERT_EQ(documents.size(), 2u);
  EXPECT_TRUE(documents.at(0).at("spec").at("containers").at(0).at("resources").at("limits").contains("nvidia.com/mig-1g.10gb"));
  EXPECT_TRUE(documents.at(1).at("spec").at("containers").at(0).at("resources").at("limits").contains("gpuslice.io/gpu-memory"));
  const auto checked = CheckConfig("devices: [1]\n");  // the configuration the example's comment applies
  EXPECT_EQ(checked.exit_code, 0) << checked.err;
}

TEST(DevicePluginManifestsTest, CheckConfigRefusesABadValueWithOneLine) {
  const auto checked = CheckConfig("unitSize: lots\n");
  EXPECT_EQ(checked.exit_code, 2);
  EXPECT_NE(checked.err.find("invalid unitSize"), std::string::npos) << checked.err;
}

}  // namespace
}  // namespace gpuslice::testing
