// `gpuslicectl status` on a GPU in MIG mode: tenants of two instances are shown under their GPU,
// each instance with its profile and MIG-UUID (NVML says which GPU an instance belongs to; the
// broker knows only the instance's UUID). The control, without NVML, shows the broker's view:
// each instance as a GPU of its own.
#include <map>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "gpuslice/sim_query.h"
#include "tests/support/shim_fixture.h"

namespace gpuslice::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class GpuslicectlMigStatusTest : public ShimTest {
 protected:
  void SetUp() override {
    ShimTest::SetUp();
    SetEnv("GPUSLICE_SIM_MODEL", "H200");
    SetEnv("GPUSLICE_SIM_MIG", "3g.71gb,2g.35gb");
  }
  ProcessResult Status(const std::vector<std::string>& extra, bool with_nvml) {
    std::vector<std::string> argv = {BinDir() + "/gpuslicectl", "status", "--state-dir", state_dir()};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return gpuslice::testing::Run(argv, with_nvml ? std::vector<std::string>{"LD_LIBRARY_PATH=" + SimLibDir()}
                                                  : std::vector<std::string>{"LD_LIBRARY_PATH="});
  }
};

TEST_F(GpuslicectlMigStatusTest, StatusShowsTheInstancesUnderTheirGpu) {
  ASSERT_EQ(RunShimmed({App("direct"), "alloc", "--chunk", "1Mi", "--count", "1"}).exit_code, 0);
  simquery::Snapshot snap;
  std::string error;
  ASSERT_TRUE(simquery::TakeSnapshot(state_path(), &snap, &error)) << error;
  const auto& gpu = snap.devices.at(0);
  ASSERT_EQ(gpu.mig_instances.size(), 2u);
  auto a = StartHolder({App("direct"), "alloc", "--chunk", "1Gi", "--count", "2"},
                       {"GPUSLICE_TENANT=team-a", "GPUSLICE_MEMORY_LIMIT=4Gi",
                        "CUDA_VISIBLE_DEVICES=" + gpu.mig_instances[0].uuid});
  auto b = StartHolder({App("direct"), "alloc", "--chunk", "1Gi", "--count", "1"},
                       {"GPUSLICE_TENANT=team-b", "GPUSLICE_MEMORY_LIMIT=2Gi",
                        "CUDA_VISIBLE_DEVICES=" + gpu.mig_instances[1].uuid});

  const ProcessResult text = Status({}, /*with_nvml=*/true);
  ASSERT_EQ(text.exit_code, 0) << Describe(text);
  const std::string header = "\nGPU " + gpu.uuid +
                             " (GPU 0, NVIDIA H200 (simulated)): MIG mode; its instances in use:\n";
  EXPECT_THAT(text.out, HasSubstr(header));
  const size_t at = text.out.find(header);
  const size_t first = text.out.find("  MIG 3g.71gb " + gpu.mig_instances[0].uuid + "  70.2 GiB total\n");
  const size_t second = text.out.find("  MIG 2g.35gb " + gpu.mig_instances[1].uuid + "  35.1 GiB total\n");
  ASSERT_TRUE(at < first && first < second && second != std::string::npos) << text.out;
  EXPECT_EQ(text.out.find(header, at + 1), std::string::npos) << "the GPU's line once: " << text.out;
  EXPECT_THAT(text.out.substr(first, second - first), HasSubstr("\n    team-a "));
  EXPECT_THAT(text.out.substr(second), HasSubstr("\n    team-b "));

  const ProcessResult json = Status({"--json"}, /*with_nvml=*/true);
  ASSERT_EQ(json.exit_code, 0) << Describe(json);
  std::map<std::string, Json> by_profile;
  const Json parsed = Json::parse(json.out);
  for (const Json& g : parsed["gpus"])
    by_profile[g["mig"].is_object() ? g["mig"]["profile"].get<std::string>() : std::string()] = g;
  ASSERT_EQ(by_profile.count("3g.71gb"), 1u) << json.out;
  EXPECT_EQ(by_profile["3g.71gb"]["mig"]["uuid"], gpu.mig_instances[0].uuid);
  EXPECT_EQ(by_profile["3g.71gb"]["mig"]["gpu_uuid"], gpu.uuid);
  EXPECT_EQ(by_profile["2g.35gb"]["tenants"][0]["name"], "team-b");

  // Control: without NVML the broker's own keys are all there is — each instance a "GPU".
  const ProcessResult alone = Status({}, /*with_nvml=*/false);
  ASSERT_EQ(alone.exit_code, 0) << Describe(alone);
  EXPECT_THAT(alone.out, Not(HasSubstr("MIG mode")));
  EXPECT_THAT(alone.out, HasSubstr("\nGPU GPU-" + gpu.mig_instances[0].uuid.substr(4) + "  70.2 GiB total\n"));
  Stop(*a);
  Stop(*b);
}

}  // namespace
}  // namespace gpuslice::testing
