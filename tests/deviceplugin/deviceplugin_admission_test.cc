// Hundreds of pods admitted by a stand-in kubelet that books the plugin's slices as the kubelet's
// device manager does (tests/deviceplugin/deviceplugin_stateful_kubelet.h) on a simulated 8-GPU
// node, whole or in MIG mode, taking the plugin's preferred allocation or (second run) choosing IDs
// itself. Pods of mixed shapes arrive and leave. After every admission:
//  - no container's memory and time are on two devices (its answer names one device, or
//    several that it holds every slice of: whole devices);
//  - no device is booked or enforced over 100% of its time or over its memory (the sum of the
//    live answers' GPUSLICE_COMPUTE_REQUEST and GPUSLICE_MEMORY_LIMIT per device);
//  - every refusal names the request and why; taking the plugin's preference, a pod is refused
//    only when no single device had room for a container of it.
// Then the kubelet's pod-resources API (a stand-in) names the pods, and the plugin's pods.json
// names each tenant's pod for gpuslicectl status.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "broker/snapshot.h"
#include "gpuslice/sim_query.h"
#include "tests/deviceplugin/deviceplugin_fake_kubelet.h"
#include "tests/deviceplugin/deviceplugin_stateful_kubelet.h"
#include "tests/support/exporter_fixture.h"
#include "tests/support/test_env.h"

namespace gpuslice::testing {
namespace {

constexpr char kResource[] = "gpuslice.io/gpu";
constexpr int kSlices = 100;

std::string Uuid(const std::string& id) { return id.substr(0, id.find("::")); }

// Memory of every advertised device (whole GPUs and MIG instances), by UUID, from the simulator.
std::map<std::string, uint64_t> DeviceMemory(const std::string& state) {
  simquery::Snapshot snap;
  std::string error;
  EXPECT_TRUE(simquery::TakeSnapshot(state, &snap, &error)) << error;
  std::map<std::string, uint64_t> memory;
  for (const auto& d : snap.devices) {
    if (d.mig_instances.empty()) memory[d.uuid] = d.total_memory;
    for (const auto& i : d.mig_instances) memory[i.uuid] = i.total_memory;
  }
  return memory;
}

uint64_t MemoryLimitBytes(const std::string& value, uint64_t device_memory) {
  if (value == "100%") return device_memory;
  EXPECT_TRUE(value.ends_with("Mi")) << value;
  return std::stoull(value) << 20;
}

class DevicePluginAdmissionTest : public SimTest {
 protected:
  void SetUp() override {
    SimTest::SetUp();
    SetEnv("GPUSLICE_SIM_DEVICES", "8");
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

  void StartPlugin(std::vector<std::string> args = {}) {
    kubelet_->Start();
    plugin_ = testing::StartPlugin(dir_, std::move(args));
    ASSERT_TRUE(kubelet_->WaitForRegistrations(1, 10000)) << plugin_->StderrSoFar();
    stub_ = kubelet_->Connect(kResource);
  }

  // The invariants over the live pods.
  void CheckBooks(const StatefulKubelet& node, const std::map<std::string, uint64_t>& memory) {
    std::map<std::string, uint64_t> compute_on, memory_on;
    for (const auto& [name, pod] : node.pods()) {
      for (const auto& c : pod.containers) {
        std::map<std::string, int> held;
        for (const auto& id : c.ids) ++held[Uuid(id)];
        const auto& envs = c.answer.envs();
        std::set<std::string> named;
        const std::string visible = envs.at("NVIDIA_VISIBLE_DEVICES");
        for (size_t at = 0; at <= visible.size();) {
          const size_t comma = visible.find(',', at);
          named.insert(visible.substr(at, comma == std::string::npos ? std::string::npos : comma - at));
          if (comma == std::string::npos) break;
          at = comma + 1;
        }
        std::set<std::string> held_devices;
        for (const auto& [uuid, n] : held) held_devices.insert(uuid);
        ASSERT_EQ(named, held_devices) << name << ": the answer names exactly the devices of its slices";
        if (held.size() > 1) {
          for (const auto& [uuid, n] : held) ASSERT_EQ(n, kSlices) << name << " split over devices: " << visible;
        }
        const uint64_t request = std::stoull(envs.at("GPUSLICE_COMPUTE_REQUEST"));
        for (const auto& [uuid, n] : held) {
          ASSERT_TRUE(memory.contains(uuid)) << uuid;
          compute_on[uuid] += request;
          memory_on[uuid] += MemoryLimitBytes(envs.at("GPUSLICE_MEMORY_LIMIT"), memory.at(uuid));
          if (held.size() == 1) {
            ASSERT_EQ(request, static_cast<uint64_t>(n)) << name << ": 1% per slice";
          }
        }
      }
    }
    for (const auto& [uuid, pct] : compute_on) ASSERT_LE(pct, 100u) << uuid << " booked over its time";
    for (const auto& [uuid, bytes] : memory_on) ASSERT_LE(bytes, memory.at(uuid)) << uuid << " booked over its memory";
  }

  // Pods of mixed shapes arrive (and some leave) `count` times. Returns {admitted, refused}.
  std::pair<int, int> Churn(StatefulKubelet& node, const std::map<std::string, uint64_t>& memory, bool follows,
                            uint32_t seed, int count) {
    std::mt19937 random(seed);
    int admitted = 0, refused = 0, next = 0, by_node = 0;
    for (int i = 0; i < count; ++i) {
      if (!node.pods().empty() && random() % 10 < 4) {  // a pod ends
        auto it = node.pods().begin();
        std::advance(it, random() % node.pods().size());
        node.Remove(it->first);
      }
      std::vector<int> shape;
      const int kind = static_cast<int>(random() % 20);
      if (kind < 11) shape = {1 + static_cast<int>(random() % 30)};                             // small
      else if (kind < 15) shape = {31 + static_cast<int>(random() % 70)};                       // up to a whole device
      else if (kind == 15) shape = {kSlices};                                                   // one whole device
      else if (kind == 16) shape = {2 * kSlices};                                               // two whole devices
      else if (kind == 17) shape = {kSlices + 1 + static_cast<int>(random() % 99)};             // never one device
      else shape = {5 + static_cast<int>(random() % 30), 5 + static_cast<int>(random() % 30)};  // two containers
      // Free slices per device before the pod: taking the preference, a refusal must be the
      // only answer.
      const std::map<std::string, int> free_on = node.FreePerDevice();
      const std::string name = "pod-" + std::to_string(next++);
      const Admission a = node.Admit(name, shape);
      if (a.admitted) {
        ++admitted;
        CheckBooks(node, memory);
        if (HasFatalFailure()) return {admitted, refused};
        continue;
      }
      ++refused;
      if (a.refusal.starts_with("node:")) {  // the scheduler would not have bound it
        ++by_node;
        continue;
      }
      EXPECT_NE(a.refusal.find("slices"), std::string::npos) << a.refusal;
      EXPECT_NE(a.refusal.find("one device"), std::string::npos) << "the reason: " << a.refusal;
      const bool never_fits = shape.size() == 1 && shape[0] > kSlices && shape[0] % kSlices != 0;
      if (never_fits) {
        EXPECT_NE(a.refusal.find(std::to_string(shape[0])), std::string::npos) << a.refusal;
      }
      if (follows && shape.size() == 1 && !never_fits) {
        int most = 0, whole = 0;
        for (const auto& [uuid, n] : free_on) most = std::max(most, n), whole += n == kSlices;
        if (shape[0] <= kSlices)
          EXPECT_LT(most, shape[0]) << name << " refused with a device of " << most << " free: " << a.refusal;
        else
          EXPECT_LT(whole, shape[0] / kSlices)
              << name << " refused with " << whole << " whole devices free: " << a.refusal;
      }
    }
    std::printf("%d pods: %d admitted, %d refused (%d for want of free slices on the node, %d by the plugin)\n", count,
                admitted, refused, by_node, refused - by_node);
    return {admitted, refused};
  }

  std::string dir_;
  std::unique_ptr<FakeKubelet> kubelet_;
  std::unique_ptr<Subprocess> plugin_;
  std::unique_ptr<v1beta1::DevicePlugin::Stub> stub_;
};

// Taking the plugin's preference, a refused container could not have had one device: checked
// by asking, at each refusal, whether any device had that many free.
TEST_F(DevicePluginAdmissionTest, HundredsOfPodsFollowingThePreferenceOnWholeGpus) {
  StartPlugin();
  const auto memory = DeviceMemory(state_path());
  ASSERT_EQ(memory.size(), 8u);
  StatefulKubelet node(*stub_, kResource, true, 7);
  node.Refresh();
  const auto [admitted, refused] = Churn(node, memory, true, 7, 400);
  std::printf("admitted %d, refused %d\n", admitted, refused);
  EXPECT_GT(admitted, 200);
  EXPECT_GT(refused, 10) << "the shapes include pods no device can take";
}

// A kubelet that picks free IDs at random (as one without GetPreferredAllocation, before 1.19,
// did) rarely picks a multi-slice container's IDs on one device: those pods are refused with the
// reason, never split. Single slices still get in.
TEST_F(DevicePluginAdmissionTest, HundredsOfPodsWithAKubeletThatIgnoresThePreference) {
  StartPlugin();
  const auto memory = DeviceMemory(state_path());
  StatefulKubelet node(*stub_, kResource, false, 11);
  node.Refresh();
  const auto [admitted, refused] = Churn(node, memory, false, 11, 400);
  std::printf("admitted %d, refused %d\n", admitted, refused);
  EXPECT_GT(admitted, 0);
  EXPECT_GT(refused, 300) << "split choices are refused";
}

// A dense MIG node: every GPU of an H200 node split into 3g.71gb, 2g.35gb and two 1g.18gb
// instances (32 devices of four sizes); a slice is of one instance.
class DevicePluginMigAdmissionTest : public DevicePluginAdmissionTest {
 protected:
  void SetUp() override {
    DevicePluginAdmissionTest::SetUp();
    SetEnv("GPUSLICE_SIM_MODEL", "H200");
    SetEnv("GPUSLICE_SIM_MIG", "3g.71gb,2g.35gb,1g.18gb,1g.18gb");
  }
};

TEST_F(DevicePluginMigAdmissionTest, HundredsOfPodsOnADenseMigNodeBothWays) {
  StartPlugin();
  const auto memory = DeviceMemory(state_path());
  ASSERT_EQ(memory.size(), 32u);
  for (const bool follows : {true, false}) {
    StatefulKubelet node(*stub_, kResource, follows, 5);
    node.Refresh();
    const auto [admitted, refused] = Churn(node, memory, follows, 5, 300);
    std::printf("%s: admitted %d, refused %d\n", follows ? "following" : "ignoring", admitted, refused);
    if (follows) {
      EXPECT_GT(admitted, 100);
    }
  }
}

// The kubelet's pod-resources API names the pods; the plugin writes which tenant is which pod
// to its pods file, and gpuslicectl status shows it beside the tenant.
TEST_F(DevicePluginAdmissionTest, TenantsAreNamedAfterTheirPodsInStatus) {
  FakePodResources pod_resources(dir_ + "/pod-resources.sock");
  StartPlugin({"--pod-resources-socket", pod_resources.socket_path(), "--container-state-dir", dir_ + "/state",
               "--container-library", ShimPath()});
  StatefulKubelet node(*stub_, kResource, true, 3);
  node.Refresh();
  ASSERT_TRUE(node.Admit("trainer", {40}).admitted);
  ASSERT_TRUE(node.Admit("web", {10, 5}).admitted);
  pod_resources.Set(node.PodResources("team-a"));
  const std::string pods_file = dir_ + "/pods.json";
  nlohmann::json pods;
  for (int attempt = 0; attempt < 100; ++attempt) {  // the plugin lists every 2 s
    std::ifstream in(pods_file);
    pods = nlohmann::json::parse(in, nullptr, false);
    if (pods.is_object() && pods["tenants"].size() == 3) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(pods.is_object()) << plugin_->StderrSoFar();
  ASSERT_EQ(pods["tenants"].size(), 3u) << pods.dump();
  for (const auto& [name, pod] : node.pods()) {
    for (const auto& c : pod.containers) {
      const std::string tenant = c.answer.envs().at("GPUSLICE_TENANT");
      ASSERT_TRUE(pods["tenants"].contains(tenant)) << tenant << " " << pods.dump();
      EXPECT_EQ(pods["tenants"][tenant]["namespace"], "team-a");
      EXPECT_EQ(pods["tenants"][tenant]["pod"], name);
      EXPECT_EQ(pods["tenants"][tenant]["container"], c.name);
    }
  }
  // The trainer's container runs; status shows its pod.
  const auto& trainer = node.pods().at("trainer").containers[0].answer;
  std::vector<std::string> env = {"LD_LIBRARY_PATH=" + SimLibDir(), "GPUSLICE_SIM_STATE=" + state_path(),
                                  "CUDA_VISIBLE_DEVICES=" + trainer.envs().at("NVIDIA_VISIBLE_DEVICES")};
  for (const auto& [name, value] : trainer.envs()) env.push_back(name + "=" + value);
  Subprocess workload({BinDir() + "/gpuslice-workload", "memory", "--chunk", "1Gi", "--count", "1", "--hold", "30"},
                      env, Inherit::kAllButGpuslice);
  ASSERT_TRUE(workload.WaitForOutput("\"holding\"", 60000)) << workload.StderrSoFar();
  const auto json = testing::Run(
      {BinDir() + "/gpuslicectl", "status", "--json", "--state-dir", dir_ + "/state", "--pods-file", pods_file});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const auto status = nlohmann::json::parse(json.out);
  bool found = false;
  for (const auto& gpu : status.at("gpus")) {
    for (const auto& t : gpu.at("tenants")) {
      if (t.at("name") != trainer.envs().at("GPUSLICE_TENANT")) continue;
      found = true;
      EXPECT_EQ(t.at("pod"), (nlohmann::json{{"namespace", "team-a"}, {"name", "trainer"}, {"container", "c0"}}));
    }
  }
  EXPECT_TRUE(found) << json.out;
  const auto table =
      testing::Run({BinDir() + "/gpuslicectl", "status", "--state-dir", dir_ + "/state", "--pods-file", pods_file});
  EXPECT_NE(table.out.find("pod team-a/trainer/c0"), std::string::npos) << table.out;
  EXPECT_NE(plugin_->StderrSoFar().find("is pod team-a/trainer container c0"), std::string::npos)
      << plugin_->StderrSoFar();
  // The exporter labels the tenant's series with its pod.
  Exporter exporter(dir_ + "/state", state_path());
  ASSERT_TRUE(exporter.WaitServing()) << exporter.process().StderrSoFar();
  const std::string metrics = exporter.Metrics().value_or("");
  EXPECT_NE(metrics.find("gpuslice_tenant_memory_used_bytes{gpu=\"" + trainer.envs().at("NVIDIA_VISIBLE_DEVICES") +
                         "\",tenant=\"" + trainer.envs().at("GPUSLICE_TENANT") +
                         "\",namespace=\"team-a\",pod=\"trainer\",container=\"c0\"} 1073741824\n"),
            std::string::npos)
      << metrics;
  workload.Kill(SIGTERM);
  workload.Wait(30000);
}

// The control: without the pod-resources API (the default socket absent), no pods file is
// written and status names no pod.
TEST_F(DevicePluginAdmissionTest, ControlWithoutThePodResourcesApiNoPodIsNamed) {
  StartPlugin({"--pod-resources-socket", dir_ + "/absent.sock"});
  StatefulKubelet node(*stub_, kResource, true, 3);
  node.Refresh();
  ASSERT_TRUE(node.Admit("trainer", {40}).admitted);
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  std::ifstream in(dir_ + "/pods.json");
  EXPECT_FALSE(in.good()) << "no pods file without the kubelet's answer";
  EXPECT_NE(plugin_->StderrSoFar().find("did not answer List"), std::string::npos) << plugin_->StderrSoFar();
}

// A container's slices are its tenant's memory request from Allocate on, before the container
// starts (memoryLimit 100%: it may borrow up to the whole GPU), and the request is released once
// the pod-resources API stops listing the pod (two Lists in a row, 2 s apart).
TEST_F(DevicePluginAdmissionTest, ASlicesMemoryIsHeldFromAllocateUntilItsPodIsGone) {
  FakePodResources pod_resources(dir_ + "/pod-resources.sock");
  StartPlugin({"--pod-resources-socket", pod_resources.socket_path(), "--memory-limit", "100%"});
  StatefulKubelet node(*stub_, kResource, true, 3);
  node.Refresh();
  const Admission trainer = node.Admit("trainer", {40});
  ASSERT_TRUE(trainer.admitted);
  const auto& envs = trainer.containers[0].answer.envs();
  const std::string tenant = envs.at("GPUSLICE_TENANT");
  EXPECT_EQ(envs.at("GPUSLICE_MEMORY_LIMIT"), "80Gi") << "100% of the simulated 80 GiB GPU";
  auto held = [&]() -> const broker::TenantView* {
    static broker::Snapshot snapshot;
    Result<broker::Snapshot> taken = broker::TakeSnapshot(dir_ + "/state");
    if (!taken.ok()) return nullptr;
    snapshot = std::move(taken).value();
    for (const auto& gpu : snapshot.gpus)
      for (const auto& t : gpu.tenants)
        if (t.name == tenant && t.announced == broker::MemoryAnnouncer::kDevicePlugin) return &t;
    return nullptr;
  };
  const broker::TenantView* view = held();
  ASSERT_NE(view, nullptr) << "held at Allocate, before any process of the container: " << plugin_->StderrSoFar();
  EXPECT_EQ(view->request, MemoryLimitBytes(envs.at("GPUSLICE_MEMORY_REQUEST"), 0));
  EXPECT_EQ(view->quota, 80ULL << 30);
  pod_resources.Set(node.PodResources("team-a"));
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));  // a List or two that show the pod
  EXPECT_NE(held(), nullptr) << "listed: still held";
  pod_resources.Set(v1::ListPodResourcesResponse());  // the pod is gone
  bool released = false;
  for (int attempt = 0; attempt < 100 && !released; ++attempt) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    released = held() == nullptr;
  }
  EXPECT_TRUE(released) << plugin_->StderrSoFar();
  EXPECT_NE(plugin_->StderrSoFar().find("tenant " + tenant + "'s pod is gone: its memory request is released"),
            std::string::npos)
      << plugin_->StderrSoFar();
}

}  // namespace
}  // namespace gpuslice::testing
