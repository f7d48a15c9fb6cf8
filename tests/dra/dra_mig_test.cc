// A claim on a MIG instance: the driver names the instance (its MIG- UUID) and books within
// the instance's memory, not the GPU's; a workload started with the spec's environment, the
// instance made the only visible device, holds exactly the booked memory and allocates it in
// that instance. More than the instance holds is refused though the GPU has more.
#include <gtest/gtest.h>

#include <signal.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "gpuslice/sim_query.h"
#include "tests/dra/dra_stand_ins.h"
#include "tests/support/test_env.h"

namespace gpuslice::testing {
namespace {

class DraMigTest : public SimTest {
 protected:
  void SetUp() override {
    SimTest::SetUp();
    SetEnv("GPUSLICE_SIM_DEVICES", "1");
    SetEnv("GPUSLICE_SIM_MODEL", "H200");
    SetEnv("GPUSLICE_SIM_MIG", "3g.71gb,2g.35gb");
    dir_ = MakeDriverDir();
    ASSERT_FALSE(dir_.empty());
    api_ = std::make_unique<StandInApiServer>();
    // Container paths unlike the host's, so that a mount the spec gets wrong shows.
    driver_ = StartDriver(dir_, api_->url(),
                          {"--container-library", "/opt/gs/libgpuslice.so", "--container-state-dir", "/gs-state"});
    ASSERT_TRUE(driver_->WaitForOutput("serving", 20000)) << driver_->StderrSoFar();
    kubelet_ = std::make_unique<StandInKubelet>(RegistrationSocket(dir_));
    std::string error;
    ASSERT_TRUE(kubelet_->Register(&error)) << error;
    std::string why;
    ASSERT_TRUE(simquery::TakeSnapshot(state_path(), &snap_, &why)) << why;
    ASSERT_EQ(snap_.devices.at(0).mig_instances.size(), 2u);
  }
  void TearDown() override {
    kubelet_.reset();
    driver_.reset();
    api_.reset();
    RemoveDriverDir(dir_);
    SimTest::TearDown();
  }

  drapb::NodePrepareResourceResponse Prepare(const ClaimSpec& spec) {
    api_->SetClaim(MakeClaim(spec));
    drapb::NodePrepareResourcesResponse response;
    EXPECT_TRUE(kubelet_->Prepare({ClaimOf(spec)}, &response).ok());
    return response.claims().at(spec.uid);
  }

  std::string dir_;
  std::unique_ptr<StandInApiServer> api_;
  std::unique_ptr<Subprocess> driver_;
  std::unique_ptr<StandInKubelet> kubelet_;
  simquery::Snapshot snap_;
};

TEST_F(DraMigTest, AClaimOnAnInstanceHoldsItsBookedMemoryInThatInstance) {
  const auto& instance = snap_.devices[0].mig_instances[1];  // the 2g.35gb
  const ClaimSpec spec{.name = "mig",
                       .uid = "3c000000-0000-4000-8000-000000000001",
                       .device = "gpu-0-mig-1",
                       .memory = "3Gi",
                       .compute = "100"};
  const auto answer = Prepare(spec);
  ASSERT_EQ(answer.error(), "");
  std::ifstream in(dir_ + "/cdi/gpuslice.io-claim_" + spec.uid + ".json");
  const auto cdi = nlohmann::json::parse(in);
  EXPECT_EQ(SchemaErrors("cdi", cdi), "");
  // As a runtime applies the spec: each value under a mount's container path is what the
  // mount's host path holds (this test runs on the host, so it names the host path).
  std::vector<std::string> env = {"LD_LIBRARY_PATH=" + SimLibDir(), "GPUSLICE_SIM_STATE=" + state_path()};
  std::string visible;
  for (const std::string entry : cdi["devices"][0]["containerEdits"]["env"]) {
    const std::string name = entry.substr(0, entry.find('=')), value = entry.substr(entry.find('=') + 1);
    std::string host = value;
    for (const auto& m : cdi["devices"][0]["containerEdits"]["mounts"]) {
      const std::string container = m["containerPath"], from = m["hostPath"];
      if (value == container || value.starts_with(container + "/")) host = from + value.substr(container.size());
    }
    env.push_back(name + "=" + host);
    if (name == "NVIDIA_VISIBLE_DEVICES") visible = value;
  }
  EXPECT_NE(std::find(env.begin(), env.end(), "LD_PRELOAD=" + ShimPath()), env.end()) << "the library's mount";
  EXPECT_NE(std::find(env.begin(), env.end(), "GPUSLICE_STATE_DIR=" + dir_ + "/state"), env.end())
      << "the state's mount";
  EXPECT_EQ(visible, instance.uuid);
  env.push_back("CUDA_VISIBLE_DEVICES=" + visible);  // what the NVIDIA runtime makes of it
  Subprocess workload({BinDir() + "/gpuslice-workload", "memory", "--chunk", "1Gi", "--count", "5", "--hold", "30"},
                      env, Inherit::kAllButGpuslice);
  ASSERT_TRUE(workload.WaitForOutput("\"holding\"", 60000)) << workload.StderrSoFar();
  simquery::Snapshot snap;
  std::string error;
  ASSERT_TRUE(simquery::TakeSnapshot(state_path(), &snap, &error)) << error;
  for (const auto& i : snap.devices[0].mig_instances) {
    EXPECT_EQ(i.used_memory, i.uuid == instance.uuid ? 3ULL << 30 : 0u) << i.uuid << " " << i.mig_profile;
  }
  workload.Kill(SIGTERM);
  const auto result = workload.Wait(30000);
  const auto line = nlohmann::json::parse(result.out.substr(result.out.rfind("{\"event\":\"result\"")));
  EXPECT_EQ(line.at("allocated").get<int>(), 3) << result.out;
  EXPECT_EQ(line.at("refused").get<int>(), 2);
}

TEST_F(DraMigTest, MoreThanTheInstanceHoldsIsRefusedThoughTheGpuHasMore) {
  const auto& instance = snap_.devices[0].mig_instances[1];
  const uint64_t over = instance.total_memory + (1ULL << 30);
  ASSERT_LT(over, snap_.devices[0].total_memory);
  const ClaimSpec spec{.name = "big",
                       .uid = "3c000000-0000-4000-8000-000000000002",
                       .device = "gpu-0-mig-1",
                       .memory = std::to_string(over),
                       .compute = "10"};
  const auto answer = Prepare(spec);
  EXPECT_NE(answer.error().find("consumes memory \"" + std::to_string(over) + "\" of gpu-0-mig-1, which has " +
                                std::to_string(instance.total_memory) + " bytes"),
            std::string::npos)
      << answer.error();
  EXPECT_TRUE(std::filesystem::is_empty(dir_ + "/cdi"));
}

}  // namespace
}  // namespace gpuslice::testing
