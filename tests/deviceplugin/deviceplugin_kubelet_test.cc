// gpuslice-device-plugin driven by a fake kubelet (tests/deviceplugin/deviceplugin_fake_kubelet.h):
// the real binary over the simulated NVML, spoken to over its unix sockets as the kubelet would.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include "gpuslice/sim_query.h"
#include "shim/options.h"
#include "tests/deviceplugin/deviceplugin_fake_kubelet.h"
#include "tests/support/test_env.h"

namespace gpuslice::testing {
namespace {

constexpr char kResource[] = "gpuslice.io/gpu";
constexpr int kRegisterTimeoutMs = 10000;  // loose: a loaded 2-core machine; targets are benchmarked

using Clock = std::chrono::steady_clock;

class DevicePluginTest : public SimTest {
 protected:
  void SetUp() override {
    SimTest::SetUp();
    ConfigureGpus();
    dir_ = MakePluginDir();
    ASSERT_FALSE(dir_.empty());
    kubelet_ = std::make_unique<FakeKubelet>(dir_);
  }
  void TearDown() override {
    plugin_.reset();
    kubelet_.reset();
    RemovePluginDir(dir_);
    SimTest::TearDown();
  }

  // The simulated node: two whole GPUs of 16 GiB (a slice of 1/100: 163 MiB and 1%).
  virtual void ConfigureGpus() {
    SetEnv("GPUSLICE_SIM_DEVICES", "2");
    SetEnv("GPUSLICE_SIM_MEMORY", "16Gi");
  }

  // Starts the kubelet, then the plugin, and waits for the resource to register.
  void StartRegistered(std::vector<std::string> args = {}) {
    kubelet_->Start();
    plugin_ = StartPlugin(dir_, std::move(args));
    ASSERT_TRUE(kubelet_->WaitForRegistrations(1, kRegisterTimeoutMs)) << plugin_->StderrSoFar();
    plugin_stub_ = kubelet_->Connect(kResource);
    ASSERT_TRUE(plugin_stub_);
  }

  // Slice IDs of device `gpu` (by the order of the first list), slices [first, first+n).
  std::vector<std::string> Units(v1beta1::DevicePlugin::Stub& stub, int gpu, int first, int n) {
    const auto devices = FirstList(stub);
    std::vector<std::string> uuids;
    for (const auto& d : devices) {
      const std::string uuid = d.id().substr(0, d.id().find("::"));
      if (uuids.empty() || uuids.back() != uuid) uuids.push_back(uuid);
    }
    std::vector<std::string> ids;
    for (const auto& d : devices) {
      if (d.id().starts_with(uuids.at(gpu) + "::") && static_cast<int>(ids.size()) < first + n) ids.push_back(d.id());
    }
    return std::vector<std::string>(ids.begin() + first, ids.end());
  }

  grpc::Status Allocate(v1beta1::DevicePlugin::Stub& stub, const std::vector<std::vector<std::string>>& containers,
                        v1beta1::AllocateResponse* response) {
    v1beta1::AllocateRequest request;
    for (const auto& ids : containers) {
      auto* c = request.add_container_requests();
      for (const auto& id : ids) c->add_devices_ids(id);
    }
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    return stub.Allocate(&context, request, response);
  }

  std::string dir_;
  std::unique_ptr<FakeKubelet> kubelet_;
  std::unique_ptr<Subprocess> plugin_;
  std::unique_ptr<v1beta1::DevicePlugin::Stub> plugin_stub_;
};

std::string Uuid(const std::string& id) { return id.substr(0, id.find("::")); }

std::vector<std::string> Join(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// The shim's own parser accepts every GPUSLICE_* variable of an answer.
void ExpectShimAccepts(const v1beta1::ContainerAllocateResponse& answer) {
  std::vector<std::string> entries;
  for (const auto& [name, value] : answer.envs()) entries.push_back(name + "=" + value);
  std::vector<char*> environment;
  for (auto& e : entries) environment.push_back(e.data());
  environment.push_back(nullptr);
  const Result<shim::ShimOptions> parsed = shim::ParseOptions(environment.data());
  EXPECT_TRUE(parsed.ok()) << parsed.message();
}

TEST_F(DevicePluginTest, RegistersItsOneResourceOnlyOnceServing) {
  StartRegistered();
  const auto registrations = kubelet_->registrations();
  ASSERT_EQ(registrations.size(), 1u);
  const auto& r = registrations[0];
  EXPECT_EQ(r.request.resource_name(), kResource);
  EXPECT_EQ(r.request.version(), "v1beta1");
  EXPECT_TRUE(r.request.options().get_preferred_allocation_available());
  EXPECT_TRUE(r.endpoint_was_serving) << r.request.endpoint() << " registered before it served";
  EXPECT_EQ(r.request.endpoint().find('/'), std::string::npos) << "the endpoint is a file name in the directory";
  std::printf("registered %s after %.1f ms\n", r.request.resource_name().c_str(), r.seconds_since_start * 1e3);
}

TEST_F(DevicePluginTest, ListAndWatchAdvertisesSlicesPerGpuNamingTheirDevice) {
  StartRegistered({"--slices-per-gpu", "10"});
  const auto list = FirstList(*plugin_stub_);
  ASSERT_EQ(list.size(), 2u * 10u);
  std::set<std::string> ids, gpus;
  for (const auto& d : list) {
    EXPECT_EQ(d.health(), "Healthy");
    EXPECT_LE(d.id().size(), 63u);
    EXPECT_TRUE(Uuid(d.id()).starts_with("GPU-")) << d.id();
    ids.insert(d.id());
    gpus.insert(Uuid(d.id()));
  }
  EXPECT_EQ(ids.size(), list.size()) << "IDs are unique";
  EXPECT_EQ(gpus.size(), 2u);
  v1beta1::AllocateResponse response;
  ASSERT_TRUE(Allocate(*plugin_stub_, {Units(*plugin_stub_, 1, 0, 3)}, &response).ok());
  EXPECT_EQ(response.container_responses(0).envs().at("GPUSLICE_MEMORY_LIMIT"),
            "4914Mi");  // 3 x 1638 MiB: 16 GiB / 10, rounded down
  EXPECT_EQ(response.container_responses(0).envs().at("GPUSLICE_COMPUTE_REQUEST"), "30");
}

// --- MIG: a GPU in MIG mode runs work only inside its instances, so each instance is sliced ---
class DevicePluginMigTest : public DevicePluginTest {
 protected:
  void ConfigureGpus() override {
    SetEnv("GPUSLICE_SIM_DEVICES", "1");
    SetEnv("GPUSLICE_SIM_MODEL", "H200");
    SetEnv("GPUSLICE_SIM_MIG", "3g.71gb,2g.35gb");
  }
};

TEST_F(DevicePluginMigTest, EachInstanceIsAdvertisedAsSlicesOfItsOwnAndNotItsGpu) {
  StartRegistered();
  simquery::Snapshot snap;
  std::string error;
  ASSERT_TRUE(simquery::TakeSnapshot(state_path(), &snap, &error)) << error;
  ASSERT_EQ(snap.devices.size(), 1u);
  const auto& instances = snap.devices[0].mig_instances;
  ASSERT_EQ(instances.size(), 2u);
  std::map<std::string, int> slices;
  for (const auto& d : FirstList(*plugin_stub_)) ++slices[Uuid(d.id())];
  EXPECT_EQ(slices.count(snap.devices[0].uuid), 0u) << "the MIG-mode GPU itself is not advertised";
  ASSERT_EQ(slices.size(), 2u);
  for (const auto& instance : instances) {
    EXPECT_TRUE(instance.uuid.starts_with("MIG-")) << instance.uuid;
    EXPECT_EQ(slices[instance.uuid], 100) << instance.uuid << " " << instance.mig_profile;
  }
}

TEST_F(DevicePluginMigTest, AllocateNamesTheInstanceAndItsSliceOfIt) {
  StartRegistered();
  simquery::Snapshot snap;
  std::string error;
  ASSERT_TRUE(simquery::TakeSnapshot(state_path(), &snap, &error)) << error;
  v1beta1::AllocateResponse response;
  const auto ids = Units(*plugin_stub_, 1, 0, 25);
  ASSERT_TRUE(Allocate(*plugin_stub_, {ids}, &response).ok());
  const auto& answer = response.container_responses(0);
  const std::string visible = answer.envs().at("NVIDIA_VISIBLE_DEVICES");
  EXPECT_TRUE(visible.starts_with("MIG-")) << visible;
  EXPECT_EQ(visible, Uuid(ids[0]));
  uint64_t instance_memory = 0;
  for (const auto& i : snap.devices[0].mig_instances) {
    if (i.uuid == visible) instance_memory = i.total_memory;
  }
  ASSERT_GT(instance_memory, 0u);
  const uint64_t slice_mib = instance_memory / 100 >> 20;
  EXPECT_EQ(answer.envs().at("GPUSLICE_MEMORY_LIMIT"), std::to_string(25 * slice_mib) + "Mi")
      << "a quarter of the instance";
  EXPECT_EQ(answer.envs().at("GPUSLICE_COMPUTE_REQUEST"), "25") << "a quarter of the instance's time";
  ExpectShimAccepts(answer);
}

TEST_F(DevicePluginTest, LostGpuTurnsUnhealthyInListAndWatchAndRecovers) {
  StartRegistered();
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(20));  // a missed update fails, not hangs
  auto reader = plugin_stub_->ListAndWatch(&context, v1beta1::Empty());
  v1beta1::ListAndWatchResponse list;
  ASSERT_TRUE(reader->Read(&list));
  const std::string lost_gpu = Uuid(list.devices(list.devices_size() - 1).id());  // GPU 1's slices come last
  const auto marked = Clock::now();
  ASSERT_EQ(testing::Run({BinDir() + "/gpuslice-sim", "gpu-lost", "1", "--state", state_path()}).exit_code, 0);
  ASSERT_TRUE(reader->Read(&list));
  const double seconds = std::chrono::duration<double>(Clock::now() - marked).count();
  std::printf("unhealthy after %.0f ms\n", seconds * 1e3);
  EXPECT_LT(seconds, 5.0);  // the target, 1 s, is measured by the benchmark
  int unhealthy = 0;
  for (const auto& d : list.devices()) {
    const bool on_lost = Uuid(d.id()) == lost_gpu;
    EXPECT_EQ(d.health(), on_lost ? "Unhealthy" : "Healthy") << d.id();
    unhealthy += on_lost;
  }
  EXPECT_EQ(unhealthy, 100);
  ASSERT_EQ(testing::Run({BinDir() + "/gpuslice-sim", "gpu-lost", "1", "--clear", "--state", state_path()}).exit_code,
            0);
  ASSERT_TRUE(reader->Read(&list));
  for (const auto& d : list.devices()) EXPECT_EQ(d.health(), "Healthy") << d.id();
  context.TryCancel();
  reader->Finish();
}

// A kubelet holding an old list may still hand over slices of a GPU that turned Unhealthy:
// Allocate refuses them (the container would start on a GPU that does not answer); the
// healthy GPU's slices are still allocated.
TEST_F(DevicePluginTest, AllocateRefusesSlicesOfAnUnhealthyGpu) {
  StartRegistered();
  const auto on_lost = Units(*plugin_stub_, 1, 0, 10);
  ASSERT_EQ(testing::Run({BinDir() + "/gpuslice-sim", "gpu-lost", "1", "--state", state_path()}).exit_code, 0);
  grpc::Status status;
  v1beta1::AllocateResponse response;
  for (int attempt = 0; attempt < 100; ++attempt) {  // until the health poll (200 ms) saw it
    status = Allocate(*plugin_stub_, {on_lost}, &response);
    if (!status.ok()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(status.error_message().find("Unhealthy"), std::string::npos) << status.error_message();
  EXPECT_TRUE(Allocate(*plugin_stub_, {Units(*plugin_stub_, 0, 0, 10)}, &response).ok());
}

// A GPU that does not answer NVML when the plugin starts (an XID 79 before a reboot) is left
// out with a line; the node's other GPUs are served. It made the plugin exit before.
TEST_F(DevicePluginTest, GpuLostAtStartIsLeftOutAndTheOthersAreServed) {
  // NVML's first user creates the simulated GPUs: a configuration check.
  ASSERT_EQ(StartPlugin(dir_, {"--check-config"})->Wait(10000).exit_code, 0);
  ASSERT_EQ(testing::Run({BinDir() + "/gpuslice-sim", "gpu-lost", "1", "--state", state_path()}).exit_code, 0);
  const auto checked = StartPlugin(dir_, {"--check-config"})->Wait(10000);
  EXPECT_EQ(checked.exit_code, 0) << "start serves the other GPU, so the check passes: " << checked.err;
  EXPECT_NE(checked.out.find("configuration valid: 1 devices"), std::string::npos) << checked.out;
  StartRegistered();
  const auto list = FirstList(*plugin_stub_);
  ASSERT_EQ(list.size(), 100u) << "GPU 0's slices only";
  for (const auto& d : list) EXPECT_EQ(d.health(), "Healthy");
  const std::string log = plugin_->StderrSoFar();
  EXPECT_NE(log.find("GPU 1 left out: nvmlDeviceGetUUID: GPU is lost"), std::string::npos) << log;
}

TEST_F(DevicePluginTest, PreferredAllocationPacksOneGpuBestFitOrRefusesWithTheReason) {
  StartRegistered();
  auto on0 = Units(*plugin_stub_, 0, 0, 60);
  auto on1 = Units(*plugin_stub_, 1, 0, 30);
  auto prefer = [&](const std::vector<std::string>& must, int size, std::vector<std::string>* chosen) {
    v1beta1::PreferredAllocationRequest request;
    auto* c = request.add_container_requests();
    for (const auto& id : on0) c->add_available_deviceids(id);
    for (const auto& id : on1) c->add_available_deviceids(id);
    for (const auto& id : must) c->add_must_include_deviceids(id);
    c->set_allocation_size(size);
    v1beta1::PreferredAllocationResponse response;
    grpc::ClientContext context;
    const auto status = plugin_stub_->GetPreferredAllocation(&context, request, &response);
    chosen->clear();
    if (status.ok() && response.container_responses_size() == 1)
      chosen->assign(response.container_responses(0).deviceids().begin(),
                     response.container_responses(0).deviceids().end());
    return status;
  };
  std::vector<std::string> chosen;
  ASSERT_TRUE(prefer({}, 25, &chosen).ok());
  ASSERT_EQ(chosen.size(), 25u);
  for (const auto& id : chosen) EXPECT_EQ(Uuid(id), Uuid(on1[0])) << "25 fit best on the GPU with 30 free";
  ASSERT_TRUE(prefer({}, 40, &chosen).ok());
  for (const auto& id : chosen) EXPECT_EQ(Uuid(id), Uuid(on0[0])) << "40 fit only on the GPU with 60 free";
  ASSERT_TRUE(prefer({on0[3]}, 3, &chosen).ok());
  EXPECT_EQ(chosen[0], on0[3]);
  for (const auto& id : chosen) EXPECT_EQ(Uuid(id), Uuid(on0[0])) << "slices stay with the required one";
  // 70 are free on the node, but on no single GPU: no preference, and the reason.
  const auto refused = prefer({}, 70, &chosen);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(refused.error_message().find("70 slices fit on no single device here: the most free on one device is 60"),
            std::string::npos)
      << refused.error_message();
  EXPECT_EQ(prefer({}, 91, &chosen).error_code(), grpc::StatusCode::INVALID_ARGUMENT) << "more than offered";
}

// Eight GPUs; GPUs 0-2 have 30 slices free, 3-5 all 100, 6-7 50. Two whole GPUs (200 slices):
// with NVLink islands of 4 (--nvlink-island 4) the placement library keeps them on island 1
// (GPUs 4, 5); the control, without islands, gets the first free GPUs, 3 and 4, across them.
class DevicePluginIslandTest : public DevicePluginTest {
 protected:
  void ConfigureGpus() override {
    SetEnv("GPUSLICE_SIM_DEVICES", "8");
    SetEnv("GPUSLICE_SIM_MEMORY", "16Gi");
  }
  std::set<int> PreferTwoWholeGpus(std::vector<std::string> args) {
    StartRegistered(std::move(args));
    std::vector<std::string> uuids;
    v1beta1::PreferredAllocationRequest request;
    auto* c = request.add_container_requests();
    for (int gpu = 0; gpu < 8; ++gpu) {
      const auto ids = Units(*plugin_stub_, gpu, 0, gpu < 3 ? 30 : gpu < 6 ? 100 : 50);
      uuids.push_back(Uuid(ids.at(0)));
      for (const auto& id : ids) c->add_available_deviceids(id);
    }
    c->set_allocation_size(200);
    v1beta1::PreferredAllocationResponse response;
    grpc::ClientContext context;
    EXPECT_TRUE(plugin_stub_->GetPreferredAllocation(&context, request, &response).ok());
    std::set<int> gpus;
    if (response.container_responses_size() != 1) return gpus;
    EXPECT_EQ(response.container_responses(0).deviceids_size(), 200);
    for (const auto& id : response.container_responses(0).deviceids())
      gpus.insert(static_cast<int>(std::find(uuids.begin(), uuids.end(), Uuid(id)) - uuids.begin()));
    return gpus;
  }
};

TEST_F(DevicePluginIslandTest, TwoWholeGpusComeFromOneNvlinkIsland) {
  EXPECT_EQ(PreferTwoWholeGpus({"--nvlink-island", "4"}), (std::set<int>{4, 5}));
}

TEST_F(DevicePluginIslandTest, ControlWithoutIslandsTakesTheFirstFreeGpus) {
  EXPECT_EQ(PreferTwoWholeGpus({}), (std::set<int>{3, 4}));
}

// The simulated node is a two-socket server (GPUs 0-3 on NUMA node 0, 4-7 on node 1): every
// slice carries its GPU's node, as NVIDIA's plugin sets it, for the kubelet's topology manager.
TEST_F(DevicePluginIslandTest, EachSliceCarriesItsGpusNumaNode) {
  StartRegistered();
  const auto list = FirstList(*plugin_stub_);
  ASSERT_EQ(list.size(), 800u);
  std::vector<std::string> uuids;
  for (const auto& d : list) {
    if (uuids.empty() || uuids.back() != Uuid(d.id())) uuids.push_back(Uuid(d.id()));
    const int gpu = static_cast<int>(uuids.size()) - 1;
    ASSERT_EQ(d.topology().nodes_size(), 1) << d.id();
    EXPECT_EQ(d.topology().nodes(0).id(), gpu < 4 ? 0 : 1) << d.id();
  }
}

TEST_F(DevicePluginTest, AllocateDerivesEachContainersSliceFromItsIdsAndNeverSplitsOne) {
  StartRegistered();
  const auto a = Units(*plugin_stub_, 0, 0, 40);
  const auto b = Units(*plugin_stub_, 1, 0, 100);
  v1beta1::AllocateResponse response;
  ASSERT_TRUE(Allocate(*plugin_stub_, {a, b}, &response).ok());
  ASSERT_EQ(response.container_responses_size(), 2);
  const auto& ra = response.container_responses(0);
  const auto& rb = response.container_responses(1);
  EXPECT_EQ(ra.envs().at("NVIDIA_VISIBLE_DEVICES"), Uuid(a[0]));
  EXPECT_EQ(ra.envs().at("GPUSLICE_MEMORY_LIMIT"), "6520Mi");  // 40 x 163 MiB: 40% of 16 GiB, rounded down
  EXPECT_EQ(ra.envs().at("GPUSLICE_COMPUTE_REQUEST"), "40");
  EXPECT_EQ(rb.envs().at("NVIDIA_VISIBLE_DEVICES"), Uuid(b[0]));
  EXPECT_EQ(rb.envs().at("GPUSLICE_MEMORY_LIMIT"), "100%") << "every slice of a GPU: the whole GPU";
  EXPECT_EQ(rb.envs().at("GPUSLICE_COMPUTE_REQUEST"), "100");
  std::set<std::string> tenants;
  for (const auto& r : response.container_responses()) {
    tenants.insert(r.envs().at("GPUSLICE_TENANT"));
    EXPECT_EQ(r.envs().at("GPUSLICE_STATE_DIR"), "/run/gpuslice");
    EXPECT_EQ(r.envs().at("LD_PRELOAD"), "/usr/local/lib/gpuslice/libgpuslice.so");
    ASSERT_EQ(r.mounts_size(), 2);
    for (const auto& m : r.mounts()) {
      if (m.container_path() == "/run/gpuslice") {
        EXPECT_EQ(m.host_path(), dir_ + "/state");
        EXPECT_FALSE(m.read_only());
      } else {
        EXPECT_EQ(m.container_path(), "/usr/local/lib/gpuslice/libgpuslice.so");
        EXPECT_EQ(m.host_path(), ShimPath());
        EXPECT_TRUE(m.read_only());
      }
    }
    ExpectShimAccepts(r);
  }
  EXPECT_EQ(tenants.size(), 2u) << "each container is a tenant of its own";

  // The tenant is derived from the IDs: the same IDs name it again (the pod-resources API
  // gives them back), whatever their order.
  v1beta1::AllocateResponse again;
  ASSERT_TRUE(Allocate(*plugin_stub_, {std::vector<std::string>(a.rbegin(), a.rend())}, &again).ok());
  EXPECT_EQ(again.container_responses(0).envs().at("GPUSLICE_TENANT"), ra.envs().at("GPUSLICE_TENANT"));

  // Slices of two GPUs that are not all of each: refused, naming the request and where.
  const auto split = Join(Units(*plugin_stub_, 0, 40, 10), Units(*plugin_stub_, 1, 0, 5));
  const auto status = Allocate(*plugin_stub_, {split}, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(status.error_message().find(
                "15 gpuslice.io/gpu slices (15% of one GPU's memory and time) were given on 2 devices"),
            std::string::npos)
      << status.error_message();
  EXPECT_NE(status.error_message().find(": 10, GPU 1 " + Uuid(b[0]) + ": 5"), std::string::npos)
      << status.error_message();

  // Every slice of both GPUs: the two GPUs whole.
  const auto both = Join(Units(*plugin_stub_, 0, 0, 100), b);
  ASSERT_TRUE(Allocate(*plugin_stub_, {both}, &response).ok());
  const auto& whole = response.container_responses(0);
  EXPECT_EQ(whole.envs().at("NVIDIA_VISIBLE_DEVICES"), Uuid(a[0]) + "," + Uuid(b[0]));
  EXPECT_EQ(whole.envs().at("GPUSLICE_MEMORY_LIMIT"), "100%");
  EXPECT_EQ(whole.envs().at("GPUSLICE_COMPUTE_REQUEST"), "100");
  EXPECT_EQ(whole.envs().at("CUDA_DEVICE_ORDER"), "PCI_BUS_ID");
  ExpectShimAccepts(whole);
}

// With cdiKind set, the answer also names its GPU as a CDI device (`<kind>=<uuid>`, the names
// `nvidia-ctk cdi generate` gives by UUID), for runtimes that inject devices through CDI; without
// it (the control) no CDI device is named.
TEST_F(DevicePluginTest, AllocateNamesEachGpuAsACdiDeviceWhenCdiKindIsSet) {
  StartRegistered({"--cdi-kind", "nvidia.com/gpu"});
  const auto whole = Join(Units(*plugin_stub_, 0, 0, 100), Units(*plugin_stub_, 1, 0, 100));
  v1beta1::AllocateResponse response;
  ASSERT_TRUE(Allocate(*plugin_stub_, {whole}, &response).ok());
  const auto& both = response.container_responses(0);
  ASSERT_EQ(both.cdi_devices_size(), 2);
  EXPECT_EQ(both.cdi_devices(0).name(), "nvidia.com/gpu=" + Uuid(whole[0]));
  EXPECT_EQ(both.cdi_devices(1).name(), "nvidia.com/gpu=" + Uuid(whole[100]));
  ASSERT_TRUE(Allocate(*plugin_stub_, {Units(*plugin_stub_, 1, 0, 2)}, &response).ok());
  const auto& one = response.container_responses(0);
  ASSERT_EQ(one.cdi_devices_size(), 1);
  EXPECT_EQ(one.cdi_devices(0).name(), "nvidia.com/gpu=" + Uuid(whole[100]));
}

TEST_F(DevicePluginTest, ControlWithoutCdiKindNoCdiDeviceIsNamed) {
  StartRegistered();
  v1beta1::AllocateResponse response;
  ASSERT_TRUE(Allocate(*plugin_stub_, {Units(*plugin_stub_, 0, 0, 2)}, &response).ok());
  EXPECT_EQ(response.container_responses(0).cdi_devices_size(), 0);
  EXPECT_FALSE(response.container_responses(0).envs().at("NVIDIA_VISIBLE_DEVICES").empty());
}

TEST_F(DevicePluginTest, LdSoPreloadModeMountsThePreloadFileInstead) {
  std::filesystem::copy_file(ShimPath(), dir_ + "/libgpuslice.so");  // the .preload file goes beside it
  StartRegistered({"--preload", "ld.so.preload", "--library", dir_ + "/libgpuslice.so"});
  v1beta1::AllocateResponse response;
  ASSERT_TRUE(Allocate(*plugin_stub_, {Units(*plugin_stub_, 0, 0, 1)}, &response).ok());
  const auto& r = response.container_responses(0);
  EXPECT_EQ(r.envs().count("LD_PRELOAD"), 0u);
  bool mounted = false;
  for (const auto& m : r.mounts()) {
    if (m.container_path() != "/etc/ld.so.preload") continue;
    mounted = true;
    std::ifstream file(m.host_path());
    std::string line;
    std::getline(file, line);
    EXPECT_EQ(line, "/usr/local/lib/gpuslice/libgpuslice.so");
    EXPECT_TRUE(m.read_only());
  }
  EXPECT_TRUE(mounted);
}

TEST_F(DevicePluginTest, MalformedRequestsGetInvalidArgumentNamingTheProblem) {
  StartRegistered();
  v1beta1::AllocateResponse response;
  const auto good = Units(*plugin_stub_, 0, 0, 1);
  struct Case {
    std::vector<std::vector<std::string>> containers;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{{"GPU-00000000-0000-4000-8000-000000000000::slice-0"}}, "unknown device ID 'GPU-00000000"},
      {{{Uuid(good[0]) + "::slice-100"}}, "::slice-100'"},
      {{{Uuid(good[0]) + "::mem-0"}}, "unknown device ID"},  // an ID of the old two-resource plugin
      {{{"not-an-id"}}, "'not-an-id'"},
      {{{}}, "no device IDs"},
      {{good, {}}, "container request 1"},
      {{{good[0], good[0]}}, "appears twice"},
      {{}, "no container"},
  };
  for (const Case& c : cases) {
    const auto status = Allocate(*plugin_stub_, c.containers, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << c.message;
    EXPECT_NE(status.error_message().find(c.message), std::string::npos) << status.error_message();
  }
  EXPECT_TRUE(Allocate(*plugin_stub_, {good}, &response).ok()) << "the plugin still answers";
}

TEST_F(DevicePluginTest, KubeletRestartDeletingSocketsGetsReregistered) {
  StartRegistered();
  kubelet_->Stop();
  kubelet_->DeleteSockets();
  const auto restarted = Clock::now();
  kubelet_->Start();
  ASSERT_TRUE(kubelet_->WaitForRegistrations(1, kRegisterTimeoutMs)) << plugin_->StderrSoFar();
  std::printf("re-registered after %.0f ms\n", std::chrono::duration<double>(Clock::now() - restarted).count() * 1e3);
  for (const auto& r : kubelet_->registrations()) EXPECT_TRUE(r.endpoint_was_serving);
  auto stub = kubelet_->Connect(kResource);
  EXPECT_EQ(FirstList(*stub).size(), 200u) << "the new socket serves the same devices";
}

TEST_F(DevicePluginTest, HundredConcurrentAllocatesAreSelfConsistentWithUniqueTenants) {
  StartRegistered();
  std::vector<std::vector<std::string>> requests;
  // 100 distinct ID lists (the tenant name is derived from them).
  for (int i = 0; i < 100; ++i) requests.push_back(Units(*plugin_stub_, i % 2, i / 2, 1 + i % 8));
  std::vector<v1beta1::AllocateResponse> responses(100);
  std::vector<grpc::Status> statuses(100);
  std::vector<std::thread> threads;
  for (int i = 0; i < 100; ++i)
    threads.emplace_back([&, i] { statuses[i] = Allocate(*plugin_stub_, {requests[i]}, &responses[i]); });
  for (auto& t : threads) t.join();
  std::set<std::string> tenants;
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE(statuses[i].ok()) << statuses[i].error_message();
    const auto& envs = responses[i].container_responses(0).envs();
    EXPECT_EQ(envs.at("NVIDIA_VISIBLE_DEVICES"), Uuid(requests[i][0]));
    EXPECT_EQ(envs.at("GPUSLICE_MEMORY_LIMIT"), std::to_string(requests[i].size() * 163) + "Mi");
    EXPECT_EQ(envs.at("GPUSLICE_COMPUTE_REQUEST"), std::to_string(requests[i].size()));
    tenants.insert(envs.at("GPUSLICE_TENANT"));
  }
  EXPECT_EQ(tenants.size(), 100u);
}

TEST_F(DevicePluginTest, SigtermStopsCleanlyAndRemovesItsSockets) {
  StartRegistered();
  plugin_->Kill(SIGTERM);
  const auto result = plugin_->Wait(10000);
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.err.find("stopped"), std::string::npos) << result.err;
  for (const auto& r : kubelet_->registrations()) {
    struct stat st;
    EXPECT_NE(stat((dir_ + "/" + r.request.endpoint()).c_str(), &st), 0) << r.request.endpoint() << " left behind";
  }
}

}  // namespace
}  // namespace gpuslice::testing
