// End to end: the answer of the plugin's Allocate, applied the way a container runtime applies
// it (the environment as given, container paths mapped to the mounts' host paths), starts
// gpuslice-workload over the simulated driver; the slice it gets is the one the pod asked for.
#include <gtest/gtest.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "gpuslice/sim_query.h"
#include "tests/deviceplugin/deviceplugin_fake_kubelet.h"
#include "tests/support/test_env.h"

namespace gpuslice::testing {
namespace {

// What the container sees at `container_path` is the host file the mount puts there.
std::string ToHostPath(const std::string& value, const v1beta1::ContainerAllocateResponse& answer) {
  for (const auto& m : answer.mounts()) {
    if (value == m.container_path() || value.starts_with(m.container_path() + "/"))
      return m.host_path() + value.substr(m.container_path().size());
  }
  return value;
}

class DevicePluginEndToEndTest : public SimTest {
 protected:
  void SetUp() override {
    SimTest::SetUp();
    ConfigureGpus();
    dir_ = MakePluginDir();
    kubelet_ = std::make_unique<FakeKubelet>(dir_);
    kubelet_->Start();
    // Container paths unlike the host's, so that a missing mapping shows.
    plugin_ =
        StartPlugin(dir_, {"--container-library", "/opt/gs/libgpuslice.so", "--container-state-dir", "/gs-state"});
    ASSERT_TRUE(kubelet_->WaitForRegistrations(1, 10000)) << plugin_->StderrSoFar();
  }
  void TearDown() override {
    plugin_.reset();
    kubelet_.reset();
    RemovePluginDir(dir_);
    SimTest::TearDown();
  }

  // One GPU: the container runtime's NVIDIA_VISIBLE_DEVICES has no simulated part.
  virtual void ConfigureGpus() {
    SetEnv("GPUSLICE_SIM_DEVICES", "1");
    SetEnv("GPUSLICE_SIM_MEMORY", "16Gi");
  }

  // Allocate for one container asking `slices`, with the IDs the plugin prefers.
  v1beta1::ContainerAllocateResponse AllocateSlices(int slices) {
    auto stub = kubelet_->Connect("gpuslice.io/gpu");
    const auto devices = FirstList(*stub);
    v1beta1::PreferredAllocationRequest preferred;
    auto* want = preferred.add_container_requests();
    for (const auto& d : devices) want->add_available_deviceids(d.id());
    want->set_allocation_size(slices);
    v1beta1::PreferredAllocationResponse chosen;
    grpc::ClientContext c1;
    EXPECT_TRUE(stub->GetPreferredAllocation(&c1, preferred, &chosen).ok());
    v1beta1::AllocateRequest request;
    auto* container = request.add_container_requests();
    for (const auto& id : chosen.container_responses(0).deviceids()) container->add_devices_ids(id);
    v1beta1::AllocateResponse response;
    grpc::ClientContext c2;
    EXPECT_TRUE(stub->Allocate(&c2, request, &response).ok());
    return response.container_responses(0);
  }

  std::string dir_;
  std::unique_ptr<FakeKubelet> kubelet_;
  std::unique_ptr<Subprocess> plugin_;
};

TEST_F(DevicePluginEndToEndTest, WorkloadStartedWithTheAllocateAnswerGetsThePodsQuotaAndShare) {
  const auto answer = AllocateSlices(30);  // 30% of the 16 GiB GPU's memory (4890 MiB) and time
  // The simulated GPU of this test (a container sees the node's driver).
  std::vector<std::string> env = {"LD_LIBRARY_PATH=" + SimLibDir(), "GPUSLICE_SIM_STATE=" + state_path()};
  for (const auto& [name, value] : answer.envs()) env.push_back(name + "=" + ToHostPath(value, answer));
  const std::string tenant = answer.envs().at("GPUSLICE_TENANT");
  // Six 1 GiB allocations against a 4890 MiB slice, held while gpuslicectl looks.
  Subprocess workload({BinDir() + "/gpuslice-workload", "memory", "--chunk", "1Gi", "--count", "6", "--hold", "30"},
                      env, Inherit::kAllButGpuslice);
  ASSERT_TRUE(workload.WaitForOutput("\"holding\"", 60000)) << workload.StderrSoFar();
  // A second process of the same container launches kernels: one tenant, two processes.
  Subprocess kernels({BinDir() + "/gpuslice-workload", "compute", "--kernel-us", "500", "--duration", "30"}, env,
                     Inherit::kAllButGpuslice);
  nlohmann::json tenant_status;
  std::string last_status;
  for (int attempt = 0; attempt < 200; ++attempt) {  // up to 20 s on a loaded machine
    const auto status = testing::Run({BinDir() + "/gpuslicectl", "status", "--json", "--state-dir", dir_ + "/state"});
    ASSERT_EQ(status.exit_code, 0) << status.err;
    last_status = status.out;
    const auto json = nlohmann::json::parse(status.out);
    for (const auto& gpu : json.at("gpus")) {
      for (const auto& t : gpu.at("tenants")) {
        if (t.at("name") == tenant) tenant_status = t;
      }
    }
    if (!tenant_status.is_null() && !tenant_status.at("compute_request_percent").is_null() &&
        tenant_status.at("processes").size() == 2)
      break;
    usleep(100000);
  }
  ASSERT_FALSE(tenant_status.is_null()) << "no tenant " << tenant << " in " << last_status << kernels.StderrSoFar()
                                        << workload.StderrSoFar();
  EXPECT_EQ(tenant_status.at("quota_bytes"), 4890ULL << 20) << tenant_status.dump();
  EXPECT_EQ(tenant_status.at("used_bytes"), 4ULL << 30) << tenant_status.dump();
  EXPECT_EQ(tenant_status.at("compute_request_percent"), 30) << tenant_status.dump();
  EXPECT_EQ(tenant_status.at("processes").size(), 2u) << "both processes are one tenant: " << tenant_status.dump();
  kernels.Kill(SIGTERM);
  EXPECT_EQ(kernels.Wait(30000).exit_code, 0);
  workload.Kill(SIGTERM);
  const auto result = workload.Wait(30000);
  const auto line = nlohmann::json::parse(result.out.substr(result.out.rfind("{\"event\":\"result\"")));
  EXPECT_EQ(line.at("allocated").get<int>(), 4) << result.out;
  EXPECT_EQ(line.at("refused").get<int>(), 2);
  EXPECT_EQ(line.at("refusals").at("CUDA_ERROR_OUT_OF_MEMORY").get<int>(), 2);
}

// A GPU in MIG mode: the slice is of the instance the answer names. The container runtime
// exposes only the instance in NVIDIA_VISIBLE_DEVICES; over the simulated driver that is
// CUDA_VISIBLE_DEVICES naming it. The tenant's memory lands in that instance, and it is limited
// to its tenth of it (whole GiB that fit) though the instance has far more free.
class DevicePluginMigEndToEndTest : public DevicePluginEndToEndTest {
 protected:
  void ConfigureGpus() override {
    SetEnv("GPUSLICE_SIM_DEVICES", "1");
    SetEnv("GPUSLICE_SIM_MODEL", "H200");
    SetEnv("GPUSLICE_SIM_MIG", "3g.71gb,2g.35gb");
  }
};

TEST_F(DevicePluginMigEndToEndTest, AWorkloadInTheNamedInstanceGetsThePodsSliceOfIt) {
  const auto memory = AllocateSlices(10);  // a tenth of an instance (best fit: the first, 3g.71gb)
  const std::string instance = memory.envs().at("NVIDIA_VISIBLE_DEVICES");
  ASSERT_TRUE(instance.starts_with("MIG-")) << instance;
  const std::string quota = memory.envs().at("GPUSLICE_MEMORY_LIMIT");
  ASSERT_TRUE(quota.ends_with("Mi")) << quota;
  const int fit = std::stoi(quota) / 1024;  // whole GiB within the quota
  ASSERT_GE(fit, 2) << quota;
  std::vector<std::string> env = {"LD_LIBRARY_PATH=" + SimLibDir(), "GPUSLICE_SIM_STATE=" + state_path(),
                                  "CUDA_VISIBLE_DEVICES=" + instance};
  for (const auto& [name, value] : memory.envs()) env.push_back(name + "=" + ToHostPath(value, memory));
  Subprocess workload({BinDir() + "/gpuslice-workload", "memory", "--chunk", "1Gi", "--count", std::to_string(fit + 2),
                       "--hold", "30"},
                      env, Inherit::kAllButGpuslice);
  ASSERT_TRUE(workload.WaitForOutput("\"holding\"", 60000)) << workload.StderrSoFar();
  simquery::Snapshot snap;
  std::string error;
  ASSERT_TRUE(simquery::TakeSnapshot(state_path(), &snap, &error)) << error;
  ASSERT_EQ(snap.devices.size(), 1u);
  for (const auto& i : snap.devices[0].mig_instances) {
    EXPECT_EQ(i.used_memory, i.uuid == instance ? uint64_t(fit) << 30 : 0u) << i.uuid << " " << i.mig_profile;
  }
  workload.Kill(SIGTERM);
  const auto result = workload.Wait(30000);
  const auto line = nlohmann::json::parse(result.out.substr(result.out.rfind("{\"event\":\"result\"")));
  EXPECT_EQ(line.at("allocated").get<int>(), fit) << result.out;
  EXPECT_EQ(line.at("refused").get<int>(), 2);
}

TEST_F(DevicePluginEndToEndTest, ControlWithoutTheAnswerTheSameWorkloadIsNotLimited) {
  Subprocess workload({BinDir() + "/gpuslice-workload", "memory", "--chunk", "1Gi", "--count", "6"},
                      {"LD_LIBRARY_PATH=" + SimLibDir(), "GPUSLICE_SIM_STATE=" + state_path()},
                      Inherit::kAllButGpuslice);
  const auto result = workload.Wait(60000);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const auto line = nlohmann::json::parse(result.out.substr(result.out.rfind("{\"event\":\"result\"")));
  EXPECT_EQ(line.at("allocated").get<int>(), 6);
}

}  // namespace
}  // namespace gpuslice::testing
