// Device health the way Kubernetes 1.36 takes it: the stand-in kubelet watches the driver's
// dra-health v1alpha1 stream (as the kubelet does when the driver lists the service), and the
// stand-in API server validates every ResourceSlice, device taints included, against the
// official schema. A GPU the simulated NVML loses turns Unhealthy within two polls and is tainted
// NoSchedule (reason gpu-lost); when it answers again it is Healthy and the taint is gone. An XID
// the simulated NVML reports (an event, as the kernel driver sends it) makes its GPU Unhealthy
// at once, tainted with the XID, until the GPU goes through a reset; an application's XID does
// not; --hard-failure-taint NoExecute makes a hard failure's taint NoExecute.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "sim/sim_state.h"
#include "tests/dra/dra_stand_ins.h"
#include "tests/support/test_env.h"

namespace gpuslice::testing {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kPollMs = 250;

class DraHealthTest : public SimTest {
 protected:
  void SetUp() override {
    SimTest::SetUp();
    SetEnv("GPUSLICE_SIM_DEVICES", "4");
    SetEnv("GPUSLICE_SIM_MEMORY", "16Gi");
    dir_ = MakeDriverDir();
    ASSERT_FALSE(dir_.empty());
    api_ = std::make_unique<StandInApiServer>();
  }
  void TearDown() override {
    kubelet_.reset();
    driver_.reset();
    api_.reset();
    RemoveDriverDir(dir_);
    SimTest::TearDown();
  }

  void Start(std::vector<std::string> flags = {}) {
    flags.insert(flags.end(), {"--poll-interval-ms", std::to_string(kPollMs)});
    driver_ = StartDriver(dir_, api_->url(), flags);
    ASSERT_TRUE(driver_->WaitForOutput("serving", 20000)) << driver_->StderrSoFar();
    ASSERT_TRUE(api_->WaitForSlices(1, 20000)) << driver_->StderrSoFar();
    kubelet_ = std::make_unique<StandInKubelet>(RegistrationSocket(dir_));
    std::string error;
    ASSERT_TRUE(kubelet_->Register(&error)) << error;
    ASSERT_TRUE(kubelet_->WatchHealth(&error)) << error;
    ASSERT_TRUE(kubelet_->WaitForHealth("gpu-1", v1alpha1::HEALTHY, Clock::time_point{}, 5000));
  }

  void GpuLost(int gpu, bool lost) {
    std::vector<std::string> argv = {BinDir() + "/gpuslice-sim", "gpu-lost", std::to_string(gpu), "--state",
                                     state_path()};
    if (!lost) argv.push_back("--clear");
    ASSERT_EQ(gpuslice::testing::Run(argv).exit_code, 0);
  }

  // What the kernel driver does on an XID: the simulated GPU's XID word (sim_state_layout.h).
  void InjectXid(int gpu, uint32_t xid) {
    std::string error;
    auto state = sim::SimState::OpenExisting(state_path(), &error);
    ASSERT_TRUE(state) << error;
    const uint32_t count = (state->device(gpu).xid.load() >> 16) + 1;
    state->device(gpu).xid.store((count << 16) | xid);
  }

  // The newest accepted slice's taints of `device` (an empty array when it has none), waiting
  // up to `timeout_ms` for one whose taints `want` (true: some, false: none).
  nlohmann::json TaintsOnceThey(const std::string& device, bool want, int timeout_ms) {
    const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    for (;;) {
      nlohmann::json taints = nlohmann::json::array();
      const auto slices = api_->accepted_slices();  // kept: a range-for does not keep a temporary's parts
      for (const auto& d : slices.back()["spec"]["devices"])
        if (d["name"] == device) taints = d.value("taints", nlohmann::json::array());
      if (taints.empty() != want || Clock::now() >= deadline) return taints;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  std::string dir_;
  std::unique_ptr<StandInApiServer> api_;
  std::unique_ptr<Subprocess> driver_;
  std::unique_ptr<StandInKubelet> kubelet_;
};

TEST_F(DraHealthTest, ALostGpuTurnsUnhealthyWithinTwoPollsIsTaintedAndRecoversWhenItReturns) {
  ASSERT_NO_FATAL_FAILURE(Start());
  const auto before = Clock::now();
  ASSERT_NO_FATAL_FAILURE(GpuLost(1, true));
  const auto lost = Clock::now();
  std::string message;
  const auto unhealthy = kubelet_->WaitForHealth("gpu-1", v1alpha1::UNHEALTHY, before, 10000, &message);
  ASSERT_TRUE(unhealthy) << driver_->StderrSoFar();
  EXPECT_LE(*unhealthy - lost, std::chrono::milliseconds(2 * kPollMs)) << "within two polls";
  EXPECT_NE(message.find("GPU is lost"), std::string::npos) << message;
  EXPECT_FALSE(kubelet_->WaitForHealth("gpu-0", v1alpha1::UNHEALTHY, before, 0)) << "the others stay healthy";

  const auto taints = TaintsOnceThey("gpu-1", true, 5000);
  ASSERT_EQ(taints.size(), 1u) << driver_->StderrSoFar();
  EXPECT_EQ(taints[0]["key"], "gpu.gpuslice.io/unhealthy");
  EXPECT_EQ(taints[0]["value"], "gpu-lost");
  EXPECT_EQ(taints[0]["effect"], "NoSchedule");
  EXPECT_TRUE(TaintsOnceThey("gpu-0", false, 0).empty());

  const auto returning = Clock::now();
  ASSERT_NO_FATAL_FAILURE(GpuLost(1, false));
  const auto back = Clock::now();
  const auto healthy = kubelet_->WaitForHealth("gpu-1", v1alpha1::HEALTHY, returning, 10000);
  ASSERT_TRUE(healthy) << driver_->StderrSoFar();
  EXPECT_LE(*healthy - back, std::chrono::milliseconds(2 * kPollMs));
  EXPECT_TRUE(TaintsOnceThey("gpu-1", false, 5000).empty()) << "the taint is lifted";
  EXPECT_EQ(api_->accepted_slices().back()["spec"]["devices"].size(), 4u) << "the device stayed published";
  EXPECT_TRUE(api_->refused_slices().empty()) << ::testing::PrintToString(api_->refused_slices());
  EXPECT_TRUE(kubelet_->health_problems().empty()) << ::testing::PrintToString(kubelet_->health_problems());
}

TEST_F(DraHealthTest, ACriticalXidTaintsItsGpuUntilAResetAndAnApplicationXidDoesNot) {
  ASSERT_NO_FATAL_FAILURE(Start({"--hard-failure-taint", "NoExecute"}));
  // The control: XID 13 (a program's illegal access) fails that program, not the GPU.
  const auto first = Clock::now();
  ASSERT_NO_FATAL_FAILURE(InjectXid(2, 13));
  EXPECT_FALSE(kubelet_->WaitForHealth("gpu-2", v1alpha1::UNHEALTHY, first, 3 * kPollMs));
  EXPECT_NE(driver_->StderrSoFar().find("XID 13 on GPU 2 (an application error"), std::string::npos)
      << driver_->StderrSoFar();

  const auto before = Clock::now();
  ASSERT_NO_FATAL_FAILURE(InjectXid(2, 48));  // a double-bit ECC error
  const auto injected = Clock::now();
  std::string message;
  const auto unhealthy = kubelet_->WaitForHealth("gpu-2", v1alpha1::UNHEALTHY, before, 10000, &message);
  ASSERT_TRUE(unhealthy) << driver_->StderrSoFar();
  EXPECT_LE(*unhealthy - injected, std::chrono::milliseconds(2 * kPollMs));
  EXPECT_NE(message.find("XID 48"), std::string::npos) << message;
  auto taints = TaintsOnceThey("gpu-2", true, 5000);
  ASSERT_EQ(taints.size(), 1u);
  EXPECT_EQ(taints[0]["value"], "xid-48");
  EXPECT_EQ(taints[0]["effect"], "NoExecute") << "a hard failure, with --hard-failure-taint NoExecute";
  // A claim on it is refused until it recovers, saying why; one on another GPU is prepared.
  const ClaimSpec on_xid{.name = "on-xid",
                         .uid = "0b6c7a52-3333-4f00-9000-000000000001",
                         .device = "gpu-2",
                         .memory = "1Gi",
                         .compute = "10"};
  const ClaimSpec elsewhere{.name = "elsewhere",
                            .uid = "0b6c7a52-3333-4f00-9000-000000000002",
                            .device = "gpu-3",
                            .memory = "1Gi",
                            .compute = "10"};
  api_->SetClaim(MakeClaim(on_xid));
  api_->SetClaim(MakeClaim(elsewhere));
  drapb::NodePrepareResourcesResponse prepared;
  ASSERT_TRUE(kubelet_->Prepare({ClaimOf(on_xid), ClaimOf(elsewhere)}, &prepared).ok());
  EXPECT_NE(prepared.claims().at(on_xid.uid).error().find("gpu-2, which is unhealthy (XID 48"), std::string::npos)
      << prepared.claims().at(on_xid.uid).error();
  EXPECT_EQ(prepared.claims().at(elsewhere.uid).error(), "");

  // NVML still answers for the GPU: it stays tainted until it is reset (leaves and answers again).
  std::this_thread::sleep_for(std::chrono::milliseconds(3 * kPollMs));
  EXPECT_FALSE(kubelet_->WaitForHealth("gpu-2", v1alpha1::HEALTHY, injected, 0));
  EXPECT_EQ(TaintsOnceThey("gpu-2", true, 0).size(), 1u);
  ASSERT_NO_FATAL_FAILURE(GpuLost(2, true));
  EXPECT_EQ(TaintsOnceThey("gpu-2", false, 3 * kPollMs).size(), 1u) << "lost now: still tainted";
  std::this_thread::sleep_for(std::chrono::milliseconds(2 * kPollMs));
  const auto reset = Clock::now();
  ASSERT_NO_FATAL_FAILURE(GpuLost(2, false));
  EXPECT_TRUE(kubelet_->WaitForHealth("gpu-2", v1alpha1::HEALTHY, reset, 10000)) << driver_->StderrSoFar();
  EXPECT_TRUE(TaintsOnceThey("gpu-2", false, 5000).empty());
  EXPECT_TRUE(api_->refused_slices().empty()) << ::testing::PrintToString(api_->refused_slices());
  EXPECT_TRUE(kubelet_->health_problems().empty()) << ::testing::PrintToString(kubelet_->health_problems());
}

// The kubelet watches only a driver that lists the service; the stream names every device.
TEST_F(DraHealthTest, TheStreamListsEveryPublishedDeviceWithItsPoolAndChecks) {
  ASSERT_NO_FATAL_FAILURE(Start());
  for (const char* device : {"gpu-0", "gpu-1", "gpu-2", "gpu-3"})
    EXPECT_TRUE(kubelet_->WaitForHealth(device, v1alpha1::HEALTHY, Clock::time_point{}, 5000)) << device;
  std::this_thread::sleep_for(std::chrono::milliseconds(3 * kPollMs));
  EXPECT_GE(kubelet_->health_answers(), 3u) << "resent every poll, so the kubelet never times a device out";
  EXPECT_TRUE(kubelet_->health_problems().empty()) << ::testing::PrintToString(kubelet_->health_problems());
}

}  // namespace
}  // namespace gpuslice::testing
