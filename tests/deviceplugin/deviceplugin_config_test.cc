// gpuslice-device-plugin's configuration: every bad value stops it at start with one line
// naming the key, and --check-config runs exactly the checks start runs (each case below is
// checked both ways). The real binary over the simulated NVML.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "tests/deviceplugin/deviceplugin_fake_kubelet.h"
#include "tests/support/test_env.h"

namespace gpuslice::testing {
namespace {

class DevicePluginConfigTest : public SimTest {
 protected:
  void SetUp() override {
    SimTest::SetUp();
    SetEnv("GPUSLICE_SIM_DEVICES", "2");
    SetEnv("GPUSLICE_SIM_MEMORY", "16Gi");
    dir_ = MakePluginDir();
    ASSERT_FALSE(dir_.empty());
  }
  void TearDown() override {
    RemovePluginDir(dir_);
    SimTest::TearDown();
  }
  std::string dir_;
};

struct Case {
  std::string yaml;
  std::vector<std::string> args;
  std::string expected;
};

TEST_F(DevicePluginConfigTest, BadConfigurationStopsStartAndCheckConfigWithTheSameLine) {
  const std::string config = dir_ + "/config.yaml";
  const std::vector<Case> cases = {
      {"slicesPerGpu: 7\n", {}, "invalid slicesPerGpu in " + config + " '7'; expected a divisor of 100"},
      {"slicesPerGpu: 0\n", {}, "invalid slicesPerGpu"},
      {"slicespergpu: 10\n", {}, "unknown slicespergpu in " + config + "; the keys are resource, slicesPerGpu"},
      {"slicesPerGpu: [1\n", {}, "is not valid YAML"},
      {"- a\n", {}, "must be a YAML mapping"},
      // Keys of the two-resource plugin: refused with what replaced them, never ignored.
      {"unitSize: 16Mi\n", {}, "unitSize in " + config + " is no longer a key: a unit is now 1/slicesPerGpu"},
      {"unitSize: 200Gi\n", {}, "is no longer a key"},
      {"memoryResource: gpuslice.io/gpu-memory\n", {}, "memoryResource in " + config + " is no longer a key"},
      {"computeResource: gpuslice.io/gpu-compute\n", {}, "computeResource in " + config + " is no longer a key"},
      // A key twice: YAML forbids it, yaml-cpp would keep one silently.
      {"slicesPerGpu: 10\nhealthIntervalMs: 100\nslicesPerGpu: 20\n",
       {},
       "slicesPerGpu in " + config + " appears twice"},
      {"devices: [0, 7]\n", {}, "devices names '7', which NVML does not list"},
      {"preload: always\n", {}, "expected env or ld.so.preload"},
      {"resource: gpu\n", {}, "invalid resource"},
      {"", {"--state-dir", "/nonexistent/gpuslice"}, "stateDir '/nonexistent/gpuslice' is not a directory"},
      {"", {"--health-interval-ms", "0"}, "invalid --health-interval-ms '0'"},
      {"", {"--nvlink-island", "3"}, "invalid --nvlink-island '3'; expected 0 (no NVLink islands), 2, 4 or 8"},
      {"", {"--pod-resources-socket", "kubelet.sock"}, "invalid --pod-resources-socket 'kubelet.sock'"},
      {"", {"--library", "/nonexistent/libgpuslice.so"}, "library '/nonexistent/libgpuslice.so' does not exist"},
      {"", {"--nvml-library", "/nonexistent/libnvidia-ml.so.1"}, "cannot load NVML from '/nonexistent"},
  };
  for (const Case& c : cases) {
    std::ofstream(config, std::ios::trunc) << c.yaml;
    for (const bool check : {false, true}) {
      std::vector<std::string> args = {"--config", config};
      args.insert(args.end(), c.args.begin(), c.args.end());
      if (check) args.push_back("--check-config");
      const auto result = StartPlugin(dir_, args)->Wait(10000);
      SCOPED_TRACE(c.yaml + (check ? " --check-config" : " start"));
      EXPECT_NE(result.exit_code, 0);
      EXPECT_NE(result.err.find(c.expected), std::string::npos) << result.err;
      EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1) << result.err;
    }
  }
}

// The control: a valid file passes both, and --check-config says what start would serve.
TEST_F(DevicePluginConfigTest, ValidConfigurationPassesTheCheck) {
  const std::string config = dir_ + "/config.yaml";
  std::ofstream(config, std::ios::trunc) << "slicesPerGpu: 20\ndevices: [1]\n";
  const auto result = StartPlugin(dir_, {"--config", config, "--check-config"})->Wait(10000);
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("configuration valid: 1 devices of 20 slices"), std::string::npos) << result.out;
}

}  // namespace
}  // namespace gpuslice::testing
