// What a prepared claim reserves (dra/memory_reservation.h): its booked memory is its tenant's
// memory request, held in the broker from NodePrepareResources on — before any container runs —
// so that a borrower on the GPU cannot take it, and released at NodeUnprepareResources; its
// configuration's memoryLimit is what it may borrow up to; claims whose requests would exceed
// the GPU are refused at prepare; with --driver-limits-hook the CDI spec runs the driver-limits
// hook as the container's createRuntime and poststop hooks (a spec the CDI schema accepts).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "broker/snapshot.h"
#include "gpuslice/sim_query.h"
#include "tests/dra/dra_stand_ins.h"
#include "tests/support/shim_fixture.h"

namespace gpuslice::testing {
namespace {

using ::testing::HasSubstr;

const nlohmann::json kBorrowTo8Gi = {{"apiVersion", "gpu.gpuslice.io/v1alpha1"},
                                     {"kind", "GpuSliceConfig"},
                                     {"memoryLimit", "8Gi"}};

class DraMemoryRequestTest : public SimTest {
 protected:
  void SetUp() override {
    SimTest::SetUp();
    SetEnv("GPUSLICE_SIM_MEMORY", "16Gi");
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
  void Start(const std::vector<std::string>& extra = {}) {
    driver_ = StartDriver(dir_, api_->url(), extra);
    ASSERT_TRUE(driver_->WaitForOutput("serving", 20000)) << driver_->StderrSoFar();
    kubelet_ = std::make_unique<StandInKubelet>(RegistrationSocket(dir_));
    std::string error;
    ASSERT_TRUE(kubelet_->Register(&error)) << error;
  }
  drapb::NodePrepareResourceResponse Prepare(const ClaimSpec& spec) {
    api_->SetClaim(MakeClaim(spec));
    drapb::NodePrepareResourcesResponse response;
    EXPECT_TRUE(kubelet_->Prepare({ClaimOf(spec)}, &response).ok());
    return response.claims().count(spec.uid) ? response.claims().at(spec.uid) : drapb::NodePrepareResourceResponse();
  }
  nlohmann::json Spec(const std::string& uid) {
    std::ifstream in(dir_ + "/cdi/gpuslice.io-claim_" + uid + ".json");
    return nlohmann::json::parse(in, nullptr, false);
  }
  const broker::TenantView* Tenant(const broker::Snapshot& snapshot, const std::string& name) {
    for (const auto& gpu : snapshot.gpus)
      for (const auto& t : gpu.tenants)
        if (t.name == name) return &t;
    return nullptr;
  }
  // A preloaded tenant without a request on the GPU: how many GiB it gets of 16 asked for.
  int BorrowerGets() {
    simquery::Snapshot sim;
    std::string error;
    EXPECT_TRUE(simquery::TakeSnapshot(state_path(), &sim, &error)) << error;
    const ProcessResult r = gpuslice::testing::Run({App("direct"), "alloc", "--chunk", "1Gi", "--count", "16"},
                                                   {"LD_PRELOAD=" + ShimPath(), "LD_LIBRARY_PATH=" + SimLibDir(),
                                                    "GPUSLICE_STATE_DIR=" + dir_ + "/state", "GPUSLICE_TENANT=borrower",
                                                    "CUDA_VISIBLE_DEVICES=" + sim.devices.at(0).uuid});
    EXPECT_EQ(r.exit_code, 0) << Describe(r);
    return ResultOf(r).value("allocated", -1);
  }

  std::string dir_;
  std::unique_ptr<StandInApiServer> api_;
  std::unique_ptr<Subprocess> driver_;
  std::unique_ptr<StandInKubelet> kubelet_;
};

TEST_F(DraMemoryRequestTest, ABookedClaimsMemoryIsHeldFromPrepareToUnprepareBeforeAnyContainerRuns) {
  Start();
  const ClaimSpec spec{.name = "train",
                       .uid = "0b6c7a52-2222-4f00-9000-000000000001",
                       .memory = "4Gi",
                       .compute = "30",
                       .config = nlohmann::json::array({OpaqueConfig("FromClaim", kBorrowTo8Gi)})};
  ASSERT_EQ(Prepare(spec).error(), "");
  const nlohmann::json cdi = Spec(spec.uid);  // kept: a loop over a temporary's member dangles
  std::map<std::string, std::string> env;
  for (const std::string entry : cdi["devices"][0]["containerEdits"]["env"])
    env[entry.substr(0, entry.find('='))] = entry.substr(entry.find('=') + 1);
  EXPECT_EQ(env.at("GPUSLICE_MEMORY_REQUEST"), "4Gi");
  EXPECT_EQ(env.at("GPUSLICE_MEMORY_LIMIT"), "8Gi");
  EXPECT_FALSE(cdi["devices"][0]["containerEdits"].contains("hooks")) << "no hook program given";
  Result<broker::Snapshot> held = broker::TakeSnapshot(dir_ + "/state");
  ASSERT_TRUE(held.ok()) << held.message();
  const broker::TenantView* tenant = Tenant(*held, "default.train");
  ASSERT_NE(tenant, nullptr) << "the request is in the broker before any process of the tenant";
  EXPECT_EQ(tenant->request, 4 * kGi);
  EXPECT_EQ(tenant->quota, 8 * kGi);
  EXPECT_EQ(tenant->announced, broker::MemoryAnnouncer::kDraDriver);
  EXPECT_EQ(BorrowerGets(), 12) << "16 GiB less the claim's 4";
  drapb::NodeUnprepareResourcesResponse response;
  ASSERT_TRUE(kubelet_->Unprepare({ClaimOf(spec)}, &response).ok());
  EXPECT_EQ(BorrowerGets(), 16) << "unprepared: nothing is reserved any more";
}

TEST_F(DraMemoryRequestTest, ClaimsWhoseRequestsWouldExceedTheGpuAreRefusedAtPrepare) {
  Start();
  const ClaimSpec big{.name = "big", .uid = "0b6c7a52-2222-4f00-9000-000000000002", .memory = "12Gi", .compute = "30"};
  const ClaimSpec more{.name = "more", .uid = "0b6c7a52-2222-4f00-9000-000000000003", .memory = "8Gi", .compute = "30"};
  ASSERT_EQ(Prepare(big).error(), "");
  const std::string refused = Prepare(more).error();
  EXPECT_THAT(refused, HasSubstr("claim default/more: gpuslice: tenant 'default.more' asks GPU GPU-"));
  EXPECT_THAT(refused, HasSubstr("but the requests held there already reserve 12 GiB (tenant 'default.big' 12 GiB)"));
  EXPECT_TRUE(Spec(more.uid).is_discarded()) << "refused: no spec written";
}

TEST_F(DraMemoryRequestTest, TheSpecRunsTheDriverLimitsHookAsTheContainersHooks) {
  Start({"--driver-limits-hook", "/opt/gpuslice/bin/gpuslice-driver-limits"});
  const ClaimSpec spec{.name = "train",
                       .uid = "0b6c7a52-2222-4f00-9000-000000000004",
                       .memory = "4Gi",
                       .compute = "30",
                       .config = nlohmann::json::array({OpaqueConfig("FromClaim", kBorrowTo8Gi)})};
  ASSERT_EQ(Prepare(spec).error(), "");
  const nlohmann::json cdi = Spec(spec.uid);
  EXPECT_EQ(SchemaErrors("cdi", cdi), "");
  const nlohmann::json& hooks = cdi["devices"][0]["containerEdits"]["hooks"];
  ASSERT_EQ(hooks.size(), 2u) << cdi.dump(2);
  EXPECT_EQ(hooks[0]["hookName"], "createRuntime");
  EXPECT_EQ(hooks[1]["hookName"], "poststop");
  EXPECT_EQ(hooks[0]["path"], "/opt/gpuslice/bin/gpuslice-driver-limits");
  const std::vector<std::string> args = hooks[0]["args"];
  for (const std::string& word :
       std::vector<std::string>{"set", "--tenant", "default.train", "--request", std::to_string(4 * kGi), "--limit",
                                std::to_string(8 * kGi), "--state-dir", dir_ + "/state"})
    EXPECT_NE(std::find(args.begin(), args.end(), word), args.end()) << word << " in " << hooks[0].dump();
  EXPECT_EQ(hooks[1]["args"][1], "clear");
}

}  // namespace
}  // namespace gpuslice::testing
