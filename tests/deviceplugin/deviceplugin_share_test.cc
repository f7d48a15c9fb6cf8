// End to end through Kubernetes' path: pods admitted by a stand-in kubelet that books the
// plugin's slices (tests/deviceplugin/deviceplugin_stateful_kubelet.h) and follows its preferred
// allocation, then started as a container runtime would start them — the Allocate answer's
// environment, the GPU it names made the only visible one — run gpuslice-workload under the
// shim and get their memory quota and their share of time on that GPU, measured against the
// simulator's ground truth. The control starts the same workloads on the same GPUs without the
// answer: the shares are then the hardware's equal time-slicing.
#include <cmath>

#include "tests/deviceplugin/deviceplugin_fake_kubelet.h"
#include "tests/deviceplugin/deviceplugin_stateful_kubelet.h"
#include "tests/support/sched_fixture.h"

namespace gpuslice::testing {
namespace {

constexpr char kResource[] = "gpuslice.io/gpu";
constexpr double kMargin = 0.03;  // the issue's ±3 points

class DevicePluginShareTest : public SchedTest {
 protected:
  void SetUp() override {
    SchedTest::SetUp();
    SetEnv("GPUSLICE_SIM_DEVICES", "2");  // before any process creates the simulated GPUs
    SetEnv("GPUSLICE_SIM_MEMORY", "16Gi");
    dir_ = MakePluginDir();
    ASSERT_FALSE(dir_.empty());
    kubelet_ = std::make_unique<FakeKubelet>(dir_);
    kubelet_->Start();
    // Container paths equal to the host's: the answer's values work as they are.
    plugin_ = StartPlugin(dir_, {"--state-dir", state_dir(), "--container-state-dir", state_dir(),
                                 "--container-library", ShimPath()});
    ASSERT_TRUE(kubelet_->WaitForRegistrations(1, 10000)) << plugin_->StderrSoFar();
    stub_ = kubelet_->Connect(kResource);
    node_ = std::make_unique<StatefulKubelet>(*stub_, kResource, true, 1);
    node_->Refresh();
  }
  void TearDown() override {
    node_.reset();
    plugin_.reset();
    kubelet_.reset();
    RemovePluginDir(dir_);
    SchedTest::TearDown();
  }

  // The container's environment: the answer's, and only its GPU visible (what the NVIDIA
  // container runtime makes of NVIDIA_VISIBLE_DEVICES).
  static std::vector<std::string> ContainerEnv(const v1beta1::ContainerAllocateResponse& answer, bool with_answer) {
    std::vector<std::string> env = {"GPUSLICE_SIM_DEVICES=2",
                                    "CUDA_VISIBLE_DEVICES=" + answer.envs().at("NVIDIA_VISIBLE_DEVICES")};
    if (with_answer) {
      for (const auto& [name, value] : answer.envs()) env.push_back(name + "=" + value);
    }
    return env;
  }

  // Admits trainer (70), service (30) and other (50): the first two share GPU 0 by the plugin's
  // best fit, other gets GPU 1. Starts a compute-bound workload in each and returns the
  // trainer's and service's shares of GPU 0 over 4 s; *other_on_gpu1 is other's device time on
  // GPU 1 and *other_on_gpu0 on GPU 0.
  std::map<std::string, double> RunPods(bool with_answer, uint64_t* other_on_gpu0, uint64_t* other_on_gpu1) {
    std::map<std::string, v1beta1::ContainerAllocateResponse> answers;
    for (const auto& [pod, slices] :
         std::vector<std::pair<std::string, int>>{{"trainer", 70}, {"service", 30}, {"other", 50}}) {
      const Admission admission = node_->Admit(pod, {slices});
      if (!admission.admitted) {
        ADD_FAILURE() << pod << " refused: " << admission.refusal;
        return {};
      }
      answers[pod] = admission.containers[0].answer;
    }
    const std::string gpu0 = answers["trainer"].envs().at("NVIDIA_VISIBLE_DEVICES");
    EXPECT_EQ(answers["service"].envs().at("NVIDIA_VISIBLE_DEVICES"), gpu0) << "best fit: 30 on the GPU with 30 left";
    EXPECT_NE(answers["other"].envs().at("NVIDIA_VISIBLE_DEVICES"), gpu0);
    for (const auto& [pod, answer] : answers) {
      StartOptions options = SchedTest::Unmanaged();  // the environment is the answer's alone
      options.env = ContainerEnv(answer, with_answer);
      if (!gpu().StartReady(pod, kComputeBound, options)) {
        ADD_FAILURE() << pod << " did not start";
        return {};
      }
    }
    SleepFor(0.5);
    const Sample a0 = gpu().Take(0), a1 = gpu().Take(1);
    SleepFor(4);
    const Sample b0 = gpu().Take(0), b1 = gpu().Take(1);
    *other_on_gpu0 = fairness::BusyBetween(a0, b0)["other"];
    *other_on_gpu1 = fairness::BusyBetween(a1, b1)["other"];
    auto shares = SharesBetween(a0, b0);
    std::printf("%s: %s\n", with_answer ? "with the answer" : "control", DescribeShares(shares).c_str());
    return shares;
  }

  std::string dir_;
  std::unique_ptr<FakeKubelet> kubelet_;
  std::unique_ptr<Subprocess> plugin_;
  std::unique_ptr<v1beta1::DevicePlugin::Stub> stub_;
  std::unique_ptr<StatefulKubelet> node_;
};

TEST_F(DevicePluginShareTest, PodsGetTheirShareOfTheirGpuAndTheirQuota) {
  uint64_t other0 = 0, other1 = 0;
  const auto shares = RunPods(true, &other0, &other1);
  ASSERT_EQ(shares.size(), 2u) << DescribeShares(shares);
  EXPECT_NEAR(shares.at("trainer"), 0.70, kMargin) << DescribeShares(shares);
  EXPECT_NEAR(shares.at("service"), 0.30, kMargin) << DescribeShares(shares);
  EXPECT_EQ(other0, 0u) << "other runs on the GPU its answer names, not GPU 0";
  EXPECT_GT(other1, 1'000'000'000u) << "other kept GPU 1 busy";
  // The service's quota: 30 slices of 163 MiB = 4890 MiB; 1 GiB allocations: four fit.
  StartOptions options = SchedTest::Unmanaged();
  options.env = ContainerEnv(node_->pods().at("service").containers[0].answer, true);
  const auto result = gpu().RunToEnd("service-memory", {"memory", "--chunk", "1Gi", "--count", "6"}, options);
  ASSERT_FALSE(result.is_null());
  EXPECT_EQ(result.at("allocated").get<int>(), 4) << result.dump();
  EXPECT_EQ(result.at("refused").get<int>(), 2) << result.dump();
}

TEST_F(DevicePluginShareTest, ControlWithoutTheAnswerTheSharesAreTheHardwaresEqualSplit) {
  uint64_t other0 = 0, other1 = 0;
  const auto shares = RunPods(false, &other0, &other1);
  ASSERT_EQ(shares.size(), 2u) << DescribeShares(shares);
  EXPECT_GT(std::abs(shares.at("trainer") - 0.70), kMargin) << DescribeShares(shares);
}

}  // namespace
}  // namespace gpuslice::testing
