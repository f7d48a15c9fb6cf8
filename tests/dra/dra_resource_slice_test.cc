// The DRA driver publishes this node's devices: one ResourceSlice that the stand-in API server
// validates against the official resource.k8s.io/v1 schema, one device per whole GPU or MIG
// instance with the capacities claims consume, and a new generation, the GPU tainted, when a
// GPU is lost, and again, the taint lifted, when it comes back.
#include <gtest/gtest.h>
#include <unistd.h>

#include "gpuslice/sim_query.h"
#include "tests/dra/dra_stand_ins.h"
#include "tests/support/test_env.h"

namespace gpuslice::testing {
namespace {

class DraResourceSliceTest : public SimTest {
 protected:
  void SetUp() override {
    SimTest::SetUp();
    // A node of 8 H200, the first two in MIG mode (a 3g.71gb and a 2g.35gb instance each).
    SetEnv("GPUSLICE_SIM_DEVICES", "8");
    SetEnv("GPUSLICE_SIM_MODEL", "H200");
    SetEnv("GPUSLICE_SIM_MIG", "3g.71gb,2g.35gb");
    SetEnv("GPUSLICE_SIM_MIG_GPUS", "2");
    dir_ = MakeDriverDir();
    ASSERT_FALSE(dir_.empty());
    api_ = std::make_unique<StandInApiServer>();
  }
  void TearDown() override {
    driver_.reset();
    api_.reset();
    RemoveDriverDir(dir_);
    SimTest::TearDown();
  }

  const nlohmann::json* Device(const nlohmann::json& slice, const std::string& name) {
    for (const auto& d : slice["spec"]["devices"]) {
      if (d["name"] == name) return &d;
    }
    return nullptr;
  }

  std::string dir_;
  std::unique_ptr<StandInApiServer> api_;
  std::unique_ptr<Subprocess> driver_;
};

TEST_F(DraResourceSliceTest, EightH200WithTwoInMigModeArePublishedAsOneValidSlice) {
  driver_ = StartDriver(dir_, api_->url());
  ASSERT_TRUE(api_->WaitForSlices(1, 20000))
      << driver_->StderrSoFar() << ::testing::PrintToString(api_->refused_slices());
  EXPECT_TRUE(api_->refused_slices().empty()) << api_->refused_slices()[0];
  const nlohmann::json slice = api_->accepted_slices()[0];
  EXPECT_EQ(SchemaErrors("resourceslice", slice), "");
  EXPECT_EQ(slice["spec"]["driver"], "gpu.gpuslice.io");
  EXPECT_EQ(slice["spec"]["nodeName"], "node-a");
  EXPECT_EQ(slice["spec"]["pool"]["name"], "node-a");
  EXPECT_EQ(slice["spec"]["pool"]["generation"], 1);
  simquery::Snapshot snap;
  std::string error;
  ASSERT_TRUE(simquery::TakeSnapshot(state_path(), &snap, &error)) << error;
  ASSERT_EQ(snap.devices.size(), 8u);
  // 2 GPUs × 2 instances + 6 whole GPUs; a MIG-mode GPU itself is not a device.
  ASSERT_EQ(slice["spec"]["devices"].size(), 10u) << slice.dump(1);
  for (int g = 2; g < 8; ++g) {
    const auto* d = Device(slice, "gpu-" + std::to_string(g));
    ASSERT_NE(d, nullptr) << g;
    EXPECT_EQ((*d)["attributes"]["uuid"]["string"], snap.devices[g].uuid);
    EXPECT_EQ((*d)["attributes"]["type"]["string"], "gpu");
    EXPECT_EQ((*d)["attributes"]["index"]["int"], g);
    EXPECT_EQ((*d)["capacity"]["memory"]["value"], std::to_string(snap.devices[g].total_memory));
    EXPECT_EQ((*d)["capacity"]["compute"]["value"], "100");
    EXPECT_EQ((*d)["allowMultipleAllocations"], true);
  }
  EXPECT_EQ(Device(slice, "gpu-0"), nullptr);
  for (int g = 0; g < 2; ++g) {
    ASSERT_EQ(snap.devices[g].mig_instances.size(), 2u);
    for (int i = 0; i < 2; ++i) {
      const auto& instance = snap.devices[g].mig_instances[i];
      const auto* d = Device(slice, "gpu-" + std::to_string(g) + "-mig-" + std::to_string(i));
      ASSERT_NE(d, nullptr) << slice.dump(1);
      EXPECT_EQ((*d)["attributes"]["uuid"]["string"], instance.uuid);
      EXPECT_EQ((*d)["attributes"]["migProfile"]["string"], instance.mig_profile);
      EXPECT_EQ((*d)["attributes"]["parentUUID"]["string"], snap.devices[g].uuid);
      EXPECT_EQ((*d)["capacity"]["memory"]["value"], std::to_string(instance.total_memory));
    }
  }
  EXPECT_FALSE((*Device(slice, "gpu-2"))["attributes"]["driverVersion"]["string"].get<std::string>().empty());
  const auto& policy = (*Device(slice, "gpu-2"))["capacity"]["compute"]["requestPolicy"];
  EXPECT_EQ(policy["default"], "1") << "a claim naming no amount gets one slice, as gpuslice.io/gpu: 1";
  const auto& memory_policy = (*Device(slice, "gpu-2"))["capacity"]["memory"]["requestPolicy"];
  EXPECT_EQ(memory_policy["default"], std::to_string((snap.devices[2].total_memory >> 20) / 100) + "Mi");
  EXPECT_EQ(policy["validRange"]["max"], "100");
}

// The schema check is a real one: the same slice with one misspelt field, or a capacity with
// no value, is refused — so a slice accepted above passed it.
TEST_F(DraResourceSliceTest, ControlTheSchemaRefusesASliceWithAnUnknownOrMissingField) {
  driver_ = StartDriver(dir_, api_->url());
  ASSERT_TRUE(api_->WaitForSlices(1, 20000)) << driver_->StderrSoFar();
  nlohmann::json misspelt = api_->accepted_slices()[0];
  misspelt["spec"]["devices"][0]["allowMultipleAlocations"] = true;
  EXPECT_NE(SchemaErrors("resourceslice", misspelt).find("allowMultipleAlocations"), std::string::npos);
  nlohmann::json no_value = api_->accepted_slices()[0];
  no_value["spec"]["devices"][0]["capacity"]["memory"].erase("value");
  EXPECT_NE(SchemaErrors("resourceslice", no_value).find("'value' is a required property"), std::string::npos);
}

TEST_F(DraResourceSliceTest, ALostGpuIsRepublishedTaintedAndUntaintedWhenItRecovers) {
  driver_ = StartDriver(dir_, api_->url());
  ASSERT_TRUE(api_->WaitForSlices(1, 20000)) << driver_->StderrSoFar();
  ASSERT_EQ(testing::Run({BinDir() + "/gpuslice-sim", "gpu-lost", "5", "--state", state_path()}).exit_code, 0);
  ASSERT_TRUE(api_->WaitForSlices(2, 20000)) << driver_->StderrSoFar();
  const auto tainted = api_->accepted_slices()[1];
  EXPECT_EQ(tainted["spec"]["pool"]["generation"], 2);
  EXPECT_EQ(tainted["spec"]["devices"].size(), 10u) << "a lost GPU stays published, tainted";
  ASSERT_NE(Device(tainted, "gpu-5"), nullptr);
  EXPECT_EQ((*Device(tainted, "gpu-5"))["taints"],
            nlohmann::json::parse(
                R"([{"key": "gpu.gpuslice.io/unhealthy", "value": "gpu-lost", "effect": "NoSchedule"}])"));
  EXPECT_FALSE(Device(tainted, "gpu-4")->contains("taints"));
  usleep(500000);  // five more health polls: the loss is said once, not once per poll
  const std::string log = driver_->StderrSoFar();
  const auto said = log.find("gpu-5 is unhealthy: nvmlDeviceGetUUID: GPU is lost");
  EXPECT_NE(said, std::string::npos) << log;
  EXPECT_EQ(log.find("gpu-5 is unhealthy", said + 1), std::string::npos) << log;
  EXPECT_EQ(api_->accepted_slices().size(), 2u) << "nothing changed, nothing published";
  ASSERT_EQ(testing::Run({BinDir() + "/gpuslice-sim", "gpu-lost", "5", "--clear", "--state", state_path()}).exit_code,
            0);
  ASSERT_TRUE(api_->WaitForSlices(3, 20000)) << driver_->StderrSoFar();
  const auto back = api_->accepted_slices()[2];
  EXPECT_EQ(back["spec"]["pool"]["generation"], 3);
  EXPECT_EQ(back["spec"]["devices"].size(), 10u);
  ASSERT_NE(Device(back, "gpu-5"), nullptr);
  EXPECT_FALSE(Device(back, "gpu-5")->contains("taints"));
  EXPECT_TRUE(api_->refused_slices().empty());
}

// A kubelet that restarts deletes its node's slices and registers its plugins again: the
// driver publishes again on that registration.
TEST_F(DraResourceSliceTest, ANewRegistrationByARestartedKubeletPublishesTheSliceAgain) {
  driver_ = StartDriver(dir_, api_->url());
  ASSERT_TRUE(api_->WaitForSlices(1, 20000)) << driver_->StderrSoFar();
  StandInKubelet kubelet(RegistrationSocket(dir_));
  std::string error;
  ASSERT_TRUE(kubelet.Register(&error)) << error;
  ASSERT_TRUE(api_->WaitForSlices(2, 20000)) << driver_->StderrSoFar();
  api_->DeleteSlices();
  ASSERT_TRUE(kubelet.Register(&error)) << error;
  ASSERT_TRUE(api_->WaitForSlices(3, 20000)) << driver_->StderrSoFar();
  EXPECT_EQ(api_->accepted_slices()[2]["spec"]["devices"].size(), 10u);
}

// A driver started while the API server is down keeps serving the kubelet and publishes once
// the server answers; the error names the server.
TEST_F(DraResourceSliceTest, AnUnreachableApiServerIsReportedAndTheSliceIsPublishedLater) {
  const std::string url = api_->url();
  api_->Stop();
  driver_ = StartDriver(dir_, url);
  ASSERT_TRUE(driver_->WaitForOutput("serving", 20000)) << driver_->StderrSoFar();
  for (int i = 0; i < 100 && driver_->StderrSoFar().find("did not answer") == std::string::npos; ++i) usleep(100000);
  EXPECT_NE(driver_->StderrSoFar().find("the API server at " + url +
                                        " did not answer POST /apis/resource.k8s.io/v1/resourceslices after 3 tries"),
            std::string::npos)
      << driver_->StderrSoFar();
  api_ = std::make_unique<StandInApiServer>("", std::stoi(url.substr(url.rfind(':') + 1)));
  ASSERT_TRUE(api_->WaitForSlices(1, 20000)) << driver_->StderrSoFar();
  EXPECT_EQ(api_->accepted_slices()[0]["spec"]["devices"].size(), 10u);
}

}  // namespace
}  // namespace gpuslice::testing
