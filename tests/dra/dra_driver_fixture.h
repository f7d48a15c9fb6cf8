// A running gpuslice-dra-driver between a stand-in API server and a stand-in kubelet
// (dra_stand_ins.h), over two simulated 16 GiB GPUs, with helpers to read what it wrote.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/dra/dra_stand_ins.h"
#include "tests/support/test_env.h"

namespace gpuslice::testing {

class DraDriverTest : public SimTest {
 protected:
  void SetUp() override {
    SimTest::SetUp();
    SetEnv("GPUSLICE_SIM_DEVICES", "2");
    SetEnv("GPUSLICE_SIM_MEMORY", "16Gi");
    dir_ = MakeDriverDir();
    ASSERT_FALSE(dir_.empty());
    api_ = std::make_unique<StandInApiServer>();
    StartAndRegister();
  }
  void TearDown() override {
    driver_.reset();
    api_.reset();
    RemoveDriverDir(dir_);
    SimTest::TearDown();
  }

  void StartAndRegister() {
    driver_ = StartDriver(dir_, api_->url());
    ASSERT_TRUE(driver_->WaitForOutput("serving", 20000)) << driver_->StderrSoFar();
    kubelet_ = std::make_unique<StandInKubelet>(RegistrationSocket(dir_));
    std::string error;
    ASSERT_TRUE(kubelet_->Register(&error)) << error;
  }

  // NodePrepareResources for `claims`; the call itself must succeed and answer every claim.
  drapb::NodePrepareResourcesResponse Prepare(const std::vector<drapb::Claim>& claims) {
    drapb::NodePrepareResourcesResponse response;
    const auto status = kubelet_->Prepare(claims, &response);
    EXPECT_TRUE(status.ok()) << "the call failed: " << status.error_message() << "\n" << driver_->StderrSoFar();
    for (const auto& c : claims) EXPECT_EQ(response.claims().count(c.uid()), 1u) << "no answer for " << c.name();
    return response;
  }
  drapb::NodePrepareResourceResponse PrepareOne(const ClaimSpec& spec) {
    const auto response = Prepare({ClaimOf(spec)});
    return response.claims().count(spec.uid) ? response.claims().at(spec.uid) : drapb::NodePrepareResourceResponse();
  }

  static nlohmann::json ReadJson(const std::string& path) {
    std::ifstream in(path);
    return nlohmann::json::parse(in, nullptr, false);
  }
  std::string SpecPath(const std::string& uid) const { return dir_ + "/cdi/gpuslice.io-claim_" + uid + ".json"; }
  std::map<std::string, std::string> SpecEnv(const std::string& uid) const {
    std::map<std::string, std::string> env;
    const nlohmann::json spec = ReadJson(SpecPath(uid));
    if (spec.is_discarded()) return env;
    for (const std::string entry : spec["devices"][0]["containerEdits"]["env"]) {
      env[entry.substr(0, entry.find('='))] = entry.substr(entry.find('=') + 1);
    }
    return env;
  }
  size_t Files(const std::string& sub) const {
    return std::distance(std::filesystem::directory_iterator(dir_ + "/" + sub), {});
  }
  size_t CheckpointClaims() const {
    const auto c = ReadJson(dir_ + "/plugin/checkpoint.json");
    return c.is_discarded() ? 0 : c["claims"].size();
  }

  std::string dir_;
  std::unique_ptr<StandInApiServer> api_;
  std::unique_ptr<Subprocess> driver_;
  std::unique_ptr<StandInKubelet> kubelet_;
};

}  // namespace gpuslice::testing
