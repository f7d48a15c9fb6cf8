// End to end through DRA: claims the scheduler allocated on one GPU (70% and 30% of its time,
// 6 GiB and 4 GiB of its memory) and one on the other, prepared by the driver through the
// stand-in kubelet, then started as a container runtime applies a CDI spec — its environment
// as written, its mounts (here at the same paths), the device it names made the only visible
// one — run gpuslice-workload under the shim: each gets its booked share of its GPU's time
// (simulator ground truth, ±3 points) and exactly its booked memory. The control starts the
// same workloads on the same GPUs without the spec's gpuslice variables: the shares are then
// the hardware's equal time-slicing.
#include <cmath>
#include <fstream>

#include "gpuslice/sim_query.h"
#include "tests/dra/dra_stand_ins.h"
#include "tests/support/sched_fixture.h"

namespace gpuslice::testing {
namespace {

constexpr double kMargin = 0.03;  // the issue's ±3 points

class DraShareTest : public SchedTest {
 protected:
  void SetUp() override {
    SchedTest::SetUp();
    SetEnv("GPUSLICE_SIM_DEVICES", "2");  // before any process creates the simulated GPUs
    SetEnv("GPUSLICE_SIM_MEMORY", "16Gi");
    dir_ = MakeDriverDir();
    ASSERT_FALSE(dir_.empty());
    api_ = std::make_unique<StandInApiServer>();
    driver_ = StartDriver(dir_, api_->url(), {}, state_dir());
    ASSERT_TRUE(driver_->WaitForOutput("serving", 20000)) << driver_->StderrSoFar();
    kubelet_ = std::make_unique<StandInKubelet>(RegistrationSocket(dir_));
    std::string error;
    ASSERT_TRUE(kubelet_->Register(&error)) << error;
    const std::vector<ClaimSpec> claims = {
        {.claim_namespace = "ml",
         .name = "trainer",
         .uid = "7a1f0000-0000-4000-8000-000000000001",
         .device = "gpu-0",
         .memory = "6Gi",
         .compute = "70"},
        {.claim_namespace = "web",
         .name = "service",
         .uid = "7a1f0000-0000-4000-8000-000000000002",
         .device = "gpu-0",
         .memory = "4Gi",
         .compute = "30"},
        {.claim_namespace = "ml",
         .name = "other",
         .uid = "7a1f0000-0000-4000-8000-000000000003",
         .device = "gpu-1",
         .memory = "8Gi",
         .compute = "50"},
    };
    for (const auto& c : claims) {
      api_->SetClaim(MakeClaim(c));
      drapb::NodePrepareResourcesResponse response;
      ASSERT_TRUE(kubelet_->Prepare({ClaimOf(c)}, &response).ok());
      const auto& answer = response.claims().at(c.uid);
      ASSERT_EQ(answer.error(), "") << c.name;
      ASSERT_EQ(answer.devices(0).cdi_device_ids_size(), 1);
      std::ifstream in(dir_ + "/cdi/gpuslice.io-claim_" + c.uid + ".json");
      specs_[c.name] = nlohmann::json::parse(in);
      ASSERT_EQ(SchemaErrors("cdi", specs_[c.name]), "") << c.name;
      claims_[c.name] = c;
    }
  }
  void TearDown() override {
    kubelet_.reset();
    driver_.reset();
    api_.reset();
    RemoveDriverDir(dir_);
    SchedTest::TearDown();
  }

  std::map<std::string, std::string> SpecEnv(const std::string& claim) {
    std::map<std::string, std::string> env;
    for (const std::string entry : specs_.at(claim)["devices"][0]["containerEdits"]["env"]) {
      env[entry.substr(0, entry.find('='))] = entry.substr(entry.find('=') + 1);
    }
    return env;
  }

  // The container's environment: the spec's (or, for the control, none of its gpuslice
  // part), and only its GPU visible (what the NVIDIA runtime makes of NVIDIA_VISIBLE_DEVICES).
  std::vector<std::string> ContainerEnv(const std::string& claim, bool with_spec) {
    const auto spec = SpecEnv(claim);
    std::vector<std::string> env = {"GPUSLICE_SIM_DEVICES=2",
                                    "CUDA_VISIBLE_DEVICES=" + spec.at("NVIDIA_VISIBLE_DEVICES")};
    if (with_spec) {
      for (const auto& [name, value] : spec) env.push_back(name + "=" + value);
    }
    return env;
  }

  // Starts a compute-bound workload per claim; returns the shares of GPU 0 over 4 s and
  // other's device time on each GPU.
  std::map<std::string, double> RunClaims(bool with_spec, uint64_t* other_on_gpu0, uint64_t* other_on_gpu1) {
    for (const std::string claim : {"trainer", "service", "other"}) {
      StartOptions options = SchedTest::Unmanaged();  // the environment is the spec's alone
      options.env = ContainerEnv(claim, with_spec);
      if (!gpu().StartReady(claim, kComputeBound, options)) {
        ADD_FAILURE() << claim << " did not start";
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
    std::printf("%s: %s\n", with_spec ? "with the CDI specs" : "control", DescribeShares(shares).c_str());
    return shares;
  }

  std::string dir_;
  std::unique_ptr<StandInApiServer> api_;
  std::unique_ptr<Subprocess> driver_;
  std::unique_ptr<StandInKubelet> kubelet_;
  std::map<std::string, nlohmann::json> specs_;
  std::map<std::string, ClaimSpec> claims_;
};

TEST_F(DraShareTest, ClaimsGetTheirBookedShareOfTheirGpuAndTheirBookedMemory) {
  uint64_t other0 = 0, other1 = 0;
  const auto shares = RunClaims(true, &other0, &other1);
  ASSERT_EQ(shares.size(), 2u) << DescribeShares(shares);
  EXPECT_NEAR(shares.at("trainer"), 0.70, kMargin) << DescribeShares(shares);
  EXPECT_NEAR(shares.at("service"), 0.30, kMargin) << DescribeShares(shares);
  EXPECT_EQ(other0, 0u) << "other runs on the GPU its spec names, not GPU 0";
  EXPECT_GT(other1, 1'000'000'000u) << "other kept GPU 1 busy";
  // Memory: the service booked 4 GiB: four 1 GiB allocations fit, the fifth and sixth are refused.
  StartOptions options = SchedTest::Unmanaged();
  options.env = ContainerEnv("service", true);
  const auto result = gpu().RunToEnd("service-memory", {"memory", "--chunk", "1Gi", "--count", "6"}, options);
  ASSERT_FALSE(result.is_null());
  EXPECT_EQ(result.at("allocated").get<int>(), 4) << result.dump();
  EXPECT_EQ(result.at("refused").get<int>(), 2) << result.dump();
  // Unprepare: the specs are gone (a container started now would get nothing of gpuslice).
  drapb::NodeUnprepareResourcesResponse response;
  std::vector<drapb::Claim> all;
  for (const auto& [name, c] : claims_) all.push_back(ClaimOf(c));
  ASSERT_TRUE(kubelet_->Unprepare(all, &response).ok());
  for (const auto& [name, c] : claims_) {
    EXPECT_EQ(response.claims().at(c.uid).error(), "") << name;
    EXPECT_FALSE(std::filesystem::exists(dir_ + "/cdi/gpuslice.io-claim_" + c.uid + ".json")) << name;
  }
}

TEST_F(DraShareTest, ControlWithoutTheSpecsVariablesTheSharesAreTheHardwaresEqualSplit) {
  uint64_t other0 = 0, other1 = 0;
  const auto shares = RunClaims(false, &other0, &other1);
  ASSERT_EQ(shares.size(), 2u) << DescribeShares(shares);
  EXPECT_GT(std::abs(shares.at("trainer") - 0.70), kMargin) << DescribeShares(shares);
  StartOptions options = SchedTest::Unmanaged();
  options.env = ContainerEnv("service", false);
  const auto result = gpu().RunToEnd("service-memory", {"memory", "--chunk", "1Gi", "--count", "6"}, options);
  ASSERT_FALSE(result.is_null());
  EXPECT_EQ(result.at("allocated").get<int>(), 6) << "no quota without the spec: " << result.dump();
}

}  // namespace
}  // namespace gpuslice::testing
