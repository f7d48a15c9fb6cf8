// In a pod the driver finds the API server as every in-cluster client does: HTTPS to
// KUBERNETES_SERVICE_HOST:KUBERNETES_SERVICE_PORT, the service account's token as the bearer,
// the server verified with the service account's ca.crt. Here the stand-in API server serves
// HTTPS with a self-signed certificate for 127.0.0.1 (openssl) and requires the token; the
// control gives the driver another CA, and the driver refuses to talk.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "tests/dra/dra_stand_ins.h"
#include "tests/support/test_env.h"

namespace gpuslice::testing {
namespace {

class DraInClusterTest : public SimTest {
 protected:
  void SetUp() override {
    SimTest::SetUp();
    SetEnv("GPUSLICE_SIM_DEVICES", "1");
    dir_ = MakeDriverDir();
    ASSERT_FALSE(dir_.empty());
    ASSERT_TRUE(MakeCertificate(dir_ + "/server"));
    ASSERT_TRUE(MakeCertificate(dir_ + "/other"));
    api_ = std::make_unique<StandInApiServer>("sa-token", 0, dir_ + "/server.crt", dir_ + "/server.key");
    const std::string url = api_->url();
    SetEnv("KUBERNETES_SERVICE_HOST", "127.0.0.1");
    SetEnv("KUBERNETES_SERVICE_PORT", url.substr(url.rfind(':') + 1));
    std::filesystem::create_directory(dir_ + "/serviceaccount");
    std::ofstream(dir_ + "/serviceaccount/token") << "sa-token\n";
  }
  void TearDown() override {
    driver_.reset();
    api_.reset();
    RemoveDriverDir(dir_);
    SimTest::TearDown();
  }

  void StartWithCa(const std::string& ca) {
    std::filesystem::copy_file(ca, dir_ + "/serviceaccount/ca.crt", std::filesystem::copy_options::overwrite_existing);
    driver_ = StartDriver(dir_, "", {"--service-account-dir", dir_ + "/serviceaccount"});
  }

  std::string dir_;
  std::unique_ptr<StandInApiServer> api_;
  std::unique_ptr<Subprocess> driver_;
};

TEST_F(DraInClusterTest, TheServiceAccountsTokenAndCaReachTheApiServerOverHttps) {
  StartWithCa(dir_ + "/server.crt");
  ASSERT_TRUE(api_->WaitForSlices(1, 20000)) << driver_->StderrSoFar();
  EXPECT_TRUE(api_->accepted_slices()[0]["spec"]["devices"].size() == 1u);
}

TEST_F(DraInClusterTest, ControlAServerTheCaDoesNotVouchForIsRefused) {
  StartWithCa(dir_ + "/other.crt");
  ASSERT_TRUE(driver_->WaitForOutput("serving", 20000)) << driver_->StderrSoFar();
  for (int i = 0; i < 100 && driver_->StderrSoFar().find("did not answer") == std::string::npos; ++i) usleep(100000);
  EXPECT_NE(driver_->StderrSoFar().find("the API server at https://127.0.0.1:"), std::string::npos)
      << driver_->StderrSoFar();
  EXPECT_NE(driver_->StderrSoFar().find("its certificate is not vouched for by " + dir_ + "/serviceaccount/ca.crt"),
            std::string::npos)
      << driver_->StderrSoFar();
  EXPECT_TRUE(api_->accepted_slices().empty());
}

}  // namespace
}  // namespace gpuslice::testing
