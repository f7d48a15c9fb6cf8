// The device plugin's manifests (deploy/kubernetes/) parse as YAML (python3-yaml) and agree
// with the plugin: the DaemonSet's config is one the plugin accepts, its volumes put the
// device-plugins directory and the library where the config says, and the pods ask for the
// resources the config advertises. Every manifest follows the GPU-node rules: GPU pods and the
// plugin tolerate the GPU taint and require the GPU label; CPU-only pods do neither.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "tests/support/subprocess.h"
#include "tests/support/test_env.h"

namespace gpuslice::testing {
namespace {

using nlohmann::json;

std::string Manifest(const std::string& path) { return SourceDir() + "/" + path; }

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

// `gpuslice-device-plugin --check-config` over a config text. The check runs everything start
// runs, the host's paths and NVML among them: those four keys are pointed at this machine's
// (flags override the file), over two simulated GPUs of a state file of its own.
ProcessResult CheckConfig(const std::string& text) {
  const std::string tag = "/tmp/gsdp-config-" + std::to_string(getpid());
  const std::string path = tag + ".yaml";
  std::filesystem::create_directories(tag + ".d");
  std::ofstream(path) << text;
  auto result = Run(
      {"/usr/bin/env", "GPUSLICE_SIM_DEVICES=2", "GPUSLICE_SIM_STATE=/dev/shm/gsdp-config-" + std::to_string(getpid()),
       BinDir() + "/gpuslice-device-plugin", "--check-config", "--config", path, "--library", ShimPath(),
       "--plugin-dir", tag + ".d", "--state-dir", tag + ".d", "--nvml-library", SimLibDir() + "/libnvidia-ml.so.1"});
  unlink(path.c_str());
  std::filesystem::remove_all(tag + ".d");
  unlink(("/dev/shm/gsdp-config-" + std::to_string(getpid())).c_str());
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
  const auto documents = LoadYaml(Manifest("deploy/kubernetes/overlays/device-plugin/gpuslice-device-plugin.yaml"));
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
  const std::string state_dir = config.at("stateDir");
  EXPECT_EQ(mounted_from[state_dir], state_dir) << "the state directory is checked and written at its host path";
  const std::string pods_file = config.at("podsFile");
  const std::string pods_dir = pods_file.substr(0, pods_file.rfind('/'));
  EXPECT_EQ(mounted_from[pods_dir], pods_dir) << "the pods file is written at its host path";
  EXPECT_FALSE(pods_dir == state_dir || pods_dir.starts_with(state_dir + "/"))
      << "the pods file is outside the state directory every slice mounts";
  const std::string socket = config.at("podResourcesSocket");
  const std::string socket_dir = socket.substr(0, socket.rfind('/'));
  EXPECT_EQ(mounted_from[socket_dir], socket_dir) << "the pod-resources socket at its host path";
  // The init container installs the library into the volume the config names.
  const auto& init = pod.at("initContainers").at(0);
  EXPECT_EQ(host_paths[init.at("volumeMounts").at(0).at("name")], library_dir);
  EXPECT_NE(init.at("command").dump().find("libgpuslice.so"), std::string::npos);
}

TEST(DevicePluginManifestsTest, PodExampleAsksForAQuarterOfOneGpu) {
  const auto daemonset = LoadYaml(Manifest("deploy/kubernetes/overlays/device-plugin/gpuslice-device-plugin.yaml"));
  const json config = ParseYamlText(Find(daemonset, "ConfigMap").at("data").at("config.yaml"));
  const auto pod = Find(LoadYaml(Manifest("deploy/kubernetes/examples/pod-gpu-slice.yaml")), "Pod");
  const auto& limits = pod.at("spec").at("containers").at(0).at("resources").at("limits");
  EXPECT_EQ(config.at("slicesPerGpu"), 100);
  EXPECT_EQ(limits.size(), 1u) << "one resource: memory and time together";
  EXPECT_EQ(limits.at(config.at("resource").get<std::string>()), 25);
}

TEST(DevicePluginManifestsTest, MigExampleLeavesTheMigGpuToNvidiasPlugin) {
  const auto documents = LoadYaml(Manifest("deploy/kubernetes/examples/pod-mig-slice.yaml"));
  ASSERT_EQ(documents.size(), 2u);
  EXPECT_TRUE(documents.at(0)
                  .at("spec")
                  .at("containers")
                  .at(0)
                  .at("resources")
                  .at("limits")
                  .contains("nvidia.com/mig-1g.10gb"));
  EXPECT_TRUE(
      documents.at(1).at("spec").at("containers").at(0).at("resources").at("limits").contains("gpuslice.io/gpu"));
  const auto checked = CheckConfig("devices: [1]\n");  // the configuration the example's comment applies
  EXPECT_EQ(checked.exit_code, 0) << checked.err;
}

// GPU nodes: labelled (affinity pulls GPU pods there) and tainted (the taint pushes others
// away); docs/kubernetes.md, "GPU nodes: taint and affinity".
constexpr char kGpuLabel[] = "nvidia.com/gpu.present";
constexpr char kGpuTaint[] = "nvidia.com/gpu";

struct PodSpecIn {
  std::string where;  // file: kind/name
  json* spec;
  bool plugin;  // the device plugin's own pods run on every GPU node
};

std::vector<PodSpecIn> PodSpecs(const std::string& file, json& documents) {
  std::vector<PodSpecIn> specs;
  for (json& d : documents) {
    const std::string kind = d.value("kind", "");
    const std::string where = file + ": " + kind + "/" + d["metadata"].value("name", "?");
    if (kind == "Pod") specs.push_back({where, &d["spec"], false});
    if (kind == "DaemonSet" || kind == "Deployment" || kind == "Job" || kind == "StatefulSet") {
      specs.push_back({where, &d["spec"]["template"]["spec"], kind == "DaemonSet"});
    }
  }
  return specs;
}

bool AsksForGpu(const json& spec) {
  if (!spec.value("resourceClaims", json::array()).empty()) return true;  // DRA: a claim of a GPU
  for (const auto& c : spec.value("containers", json::array())) {
    const json resources = c.value("resources", json::object());
    for (const char* part : {"limits", "requests"}) {
      const json asked = resources.value(part, json::object());  // named: items() refers to it
      for (const auto& [name, _] : asked.items()) {
        if (name.starts_with("gpuslice.io/") || name.starts_with("nvidia.com/")) return true;
      }
    }
  }
  return false;
}

bool ToleratesGpuTaint(const json& spec) {
  for (const auto& t : spec.value("tolerations", json::array())) {
    if (t.value("key", "") == kGpuTaint && t.value("effect", "NoSchedule") == "NoSchedule" &&
        (t.value("operator", "Equal") == "Exists" || t.contains("value"))) {
      return true;
    }
  }
  return false;
}

// Every term of the required node affinity (terms are ORed) asks for the GPU label = "true".
bool RequiresGpuLabel(const json& spec) {
  const json terms = spec.value("affinity", json::object())
                         .value("nodeAffinity", json::object())
                         .value("requiredDuringSchedulingIgnoredDuringExecution", json::object())
                         .value("nodeSelectorTerms", json::array());
  if (terms.empty()) return false;
  for (const auto& term : terms) {
    bool found = false;
    for (const auto& e : term.value("matchExpressions", json::array())) {
      found = found || (e.value("key", "") == kGpuLabel && e.value("operator", "") == "In" &&
                        e.value("values", json::array()) == json::array({"true"}));
    }
    if (!found) return false;
  }
  return true;
}

std::vector<std::string> GpuNodeRuleProblems(const std::string& file, json& documents) {
  std::vector<std::string> problems;
  for (const PodSpecIn& p : PodSpecs(file, documents)) {
    if (p.plugin || AsksForGpu(*p.spec)) {
      if (!ToleratesGpuTaint(*p.spec))
        problems.push_back(p.where + " must tolerate the taint " + kGpuTaint + ":NoSchedule");
      if (!RequiresGpuLabel(*p.spec))
        problems.push_back(p.where + " must require the node label " + kGpuLabel + "=true");
    } else {
      if (ToleratesGpuTaint(*p.spec)) problems.push_back(p.where + " is CPU-only and must not tolerate " + kGpuTaint);
      if (RequiresGpuLabel(*p.spec)) problems.push_back(p.where + " is CPU-only and must not require GPU nodes");
    }
  }
  return problems;
}

// Every manifest of deploy/kubernetes/ (the kustomize tree's and the examples', not the
// kustomization files) by path, parsed in one python3 run.
std::map<std::string, json> EveryManifest() {
  const auto r =
      Run({"/usr/bin/env", "python3", "-c",
           "import glob, json, os, sys, yaml\n"
           "out = {}\n"
           "for path in sorted(glob.glob(os.path.join(sys.argv[1], '**', '*.yaml'), recursive=True)):\n"
           "    if os.path.basename(path) == 'kustomization.yaml': continue\n"
           "    with open(path) as f:\n"
           "        out[os.path.relpath(path, sys.argv[1])] = [d for d in yaml.safe_load_all(f) if d is not None]\n"
           "print(json.dumps(out))\n",
           SourceDir() + "/deploy/kubernetes"});
  EXPECT_EQ(r.exit_code, 0) << "a manifest does not parse as YAML: " << r.err;
  return r.exit_code == 0 ? json::parse(r.out).get<std::map<std::string, json>>() : std::map<std::string, json>{};
}

TEST(DevicePluginManifestsTest, EveryManifestKeepsGpuPodsOnGpuNodesAndOthersOff) {
  auto manifests = EveryManifest();
  EXPECT_GE(manifests.size(), 4u);
  int gpu_specs = 0, cpu_specs = 0, plugin_specs = 0;
  for (auto& [file, documents] : manifests) {
    for (const std::string& problem : GpuNodeRuleProblems(file, documents)) ADD_FAILURE() << problem;
    for (const PodSpecIn& p : PodSpecs(file, documents)) {
      (AsksForGpu(*p.spec) ? gpu_specs : p.plugin ? plugin_specs : cpu_specs) += 1;
    }
  }
  EXPECT_EQ(plugin_specs, 3);  // the device plugin's, the DRA driver's and the exporter's DaemonSets
  EXPECT_GE(gpu_specs, 3);     // the slice and both MIG-example pods
  EXPECT_GE(cpu_specs, 1);     // pod-cpu-only.yaml
}

// The control: each rule, broken in a copy of a real manifest, is reported.
TEST(DevicePluginManifestsTest, RemovingATolerationOrAffinityIsCaught) {
  auto manifests = EveryManifest();
  int broken = 0;
  for (auto& [file, documents] : manifests) {
    const size_t specs = PodSpecs(file, documents).size();
    for (size_t i = 0; i < specs; ++i) {
      for (const char* field : {"tolerations", "affinity"}) {
        json copy = documents;
        PodSpecIn p = PodSpecs(file, copy)[i];
        if (p.plugin || AsksForGpu(*p.spec)) {
          ASSERT_TRUE(p.spec->contains(field)) << p.where << " " << field;
          p.spec->erase(field);
        } else if (std::string(field) == "tolerations") {
          (*p.spec)["tolerations"] =
              json::array({{{"key", kGpuTaint}, {"operator", "Exists"}, {"effect", "NoSchedule"}}});
        } else {
          (*p.spec)["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] =
              json::array({{{"matchExpressions",
                             json::array({{{"key", kGpuLabel}, {"operator", "In"}, {"values", {"true"}}}})}}});
        }
        EXPECT_EQ(GpuNodeRuleProblems(file, copy).size(), 1u) << p.where << " without/with " << field;
        ++broken;
      }
    }
  }
  EXPECT_GE(broken, 10);
}

TEST(DevicePluginManifestsTest, CheckConfigRefusesABadValueWithOneLine) {
  const auto checked = CheckConfig("slicesPerGpu: lots\n");
  EXPECT_EQ(checked.exit_code, 2);
  EXPECT_NE(checked.err.find("invalid slicesPerGpu"), std::string::npos) << checked.err;
}

}  // namespace
}  // namespace gpuslice::testing
