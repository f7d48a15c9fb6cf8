// The DRA driver's manifests (deploy/kubernetes/overlays/dra/, the claim examples) parse as YAML (python3-yaml) and
// agree with the driver: every claim template names the DeviceClass, asks for the capacities the driver publishes, and
// carries an opaque configuration the driver accepts; the DaemonSet's flags are the driver's, its RBAC covers the calls
// the driver makes.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "dra/claim_allocation.h"
#include "dra/claim_environment.h"
#include "tests/dra/dra_stand_ins.h"
#include "tests/support/subprocess.h"
#include "tests/support/test_env.h"

namespace gpuslice::testing {
namespace {

using nlohmann::json;

json LoadYaml(const std::string& name) {
  const auto r = Run({"/usr/bin/env", "python3", "-c",
                      "import json, sys, yaml\n"
                      "with open(sys.argv[1]) as f:\n"
                      "    print(json.dumps([d for d in yaml.safe_load_all(f) if d is not None]))\n",
                      SourceDir() + "/" + name});
  EXPECT_EQ(r.exit_code, 0) << name << " does not parse as YAML: " << r.err;
  return r.exit_code == 0 ? json::parse(r.out) : json::array();
}

json Find(const json& documents, const std::string& kind) {
  for (const auto& d : documents) {
    if (d.at("kind") == kind) return d;
  }
  ADD_FAILURE() << "no " << kind;
  return json::object();
}

TEST(DraManifestsTest, ClaimTemplatesNameTheClassAndCarryConfigurationsTheDriverAccepts) {
  const json device_class = Find(LoadYaml("deploy/kubernetes/overlays/dra/deviceclass.yaml"), "DeviceClass");
  EXPECT_EQ(device_class["metadata"]["name"], "gpu.gpuslice.io");
  // Valid at the 1.36 level (extendedResourceName), and serving the device plugin's resource.
  EXPECT_EQ(SchemaErrors("deviceclass", device_class), "");
  EXPECT_EQ(device_class["spec"]["extendedResourceName"], "gpuslice.io/gpu");
  json misspelt = device_class;
  misspelt["spec"]["extendedResourceNme"] = "gpuslice.io/gpu";  // the control: the schema refuses it
  EXPECT_NE(SchemaErrors("deviceclass", misspelt).find("extendedResourceNme"), std::string::npos);
  // The class's configuration, as an allocation carries it.
  json configs = json::array();
  for (const auto& c : device_class["spec"]["config"])
    configs.push_back({{"source", "FromClass"}, {"opaque", c["opaque"]}});
  dra::DriverConfig config;
  config.node_name = "node-a";
  gpu::GpuInfo gpu;
  gpu.uuid = "GPU-1";
  gpu.total_memory = 143771ULL << 20;  // an H200
  const std::vector<dra::NodeDevice> devices = {{"gpu-0", gpu, ""}};
  for (const char* name : {"deploy/kubernetes/examples/claim-template-10gi-30pct.yaml",
                           "deploy/kubernetes/examples/claim-template-mig-instance.yaml",
                           "deploy/kubernetes/examples/claim-template-latency-service.yaml"}) {
    const json tmpl = Find(LoadYaml(name), "ResourceClaimTemplate");
    const json& devices_spec = tmpl["spec"]["spec"]["devices"];
    const json& request = devices_spec["requests"][0];
    EXPECT_EQ(request["exactly"]["deviceClassName"], "gpu.gpuslice.io") << name;
    const json& asked = request["exactly"]["capacity"]["requests"];
    for (const auto& [capacity, amount] : asked.items()) {
      EXPECT_TRUE(capacity == "memory" || capacity == "compute") << name << ": " << capacity;
    }
    // What the scheduler would leave: the amounts asked, consumed on gpu-0.
    json all = configs;
    for (const auto& c : devices_spec.value("config", json::array()))
      all.push_back(
          {{"source", "FromClaim"}, {"opaque", c["opaque"]}, {"requests", c.value("requests", json::array())}});
    const json claim = {{"metadata", {{"namespace", "default"}, {"name", "c"}, {"uid", "u"}}},
                        {"status",
                         {{"allocation",
                           {{"devices",
                             {{"results",
                               {{{"request", request["name"]},
                                 {"driver", "gpu.gpuslice.io"},
                                 {"pool", "node-a"},
                                 {"device", "gpu-0"},
                                 {"consumedCapacity", asked}}}},
                              {"config", all}}}}}}}};
    const Result<dra::ClaimDevice> device = dra::ReadClaimAllocation(claim, config, devices);
    EXPECT_TRUE(device.ok()) << name << ": " << device.message();
    if (!device.ok()) continue;
    const Result<std::map<std::string, std::string>> env = dra::ClaimEnvironment(*device, config, "default.c");
    EXPECT_TRUE(env.ok()) << name << ": " << env.message();
  }
}

TEST(DraManifestsTest, TheDaemonSetsFlagsAreTheDriversAndItsRbacCoversItsCalls) {
  const json documents = LoadYaml("deploy/kubernetes/overlays/dra/gpuslice-dra-driver.yaml");
  const json daemonset = Find(documents, "DaemonSet");
  const json& container = daemonset["spec"]["template"]["spec"]["containers"][0];
  const auto help = gpuslice::testing::Run({BinDir() + "/gpuslice-dra-driver", "--help"});
  ASSERT_EQ(help.exit_code, 0) << help.err;
  // A flag it does not have is a usage error, exit status 2 as every tool's (common/exit_codes.h).
  EXPECT_EQ(gpuslice::testing::Run({BinDir() + "/gpuslice-dra-driver", "--no-such-flag"}).exit_code, 2);
  for (const std::string arg : container["command"]) {
    if (!arg.starts_with("--")) continue;
    EXPECT_NE(help.out.find(arg.substr(0, arg.find('='))), std::string::npos) << arg << " is not a flag of the driver";
  }
  std::set<std::string> granted;
  const json role = Find(documents, "ClusterRole");
  for (const auto& rule : role["rules"]) {
    for (const std::string resource : rule["resources"]) {
      for (const std::string verb : rule["verbs"]) granted.insert(resource + ":" + verb);
    }
  }
  for (const char* needed :
       {"resourceclaims:get", "resourceslices:get", "resourceslices:create", "resourceslices:update"}) {
    EXPECT_TRUE(granted.count(needed)) << needed << " of " << ::testing::PrintToString(granted);
  }
  EXPECT_EQ(daemonset["spec"]["template"]["spec"]["serviceAccountName"], "gpuslice-dra-driver");
}

}  // namespace
}  // namespace gpuslice::testing
