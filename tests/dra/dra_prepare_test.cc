// The kubelet's side of the DRA driver: registration through the plugin registration socket,
// NodePrepareResources reading each claim from the (stand-in) API server and answering with
// CDI device IDs whose spec — valid by the CDI project's schema — gives the container exactly
// the memory and compute the scheduler booked; NodeUnprepareResources removing it; both
// idempotent; bad input refused in one line with nothing written; prepared claims kept across
// a restart of the driver.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "gpuslice/sim_query.h"
#include "tests/dra/dra_driver_fixture.h"
#include "tests/dra/dra_stand_ins.h"
#include "tests/support/test_env.h"

namespace gpuslice::testing {
namespace {

// The environment of a CDI spec's first device.
std::map<std::string, std::string> EnvOf(const nlohmann::json& spec) {
  std::map<std::string, std::string> env;
  for (const std::string entry : spec["devices"][0]["containerEdits"]["env"]) {
    env[entry.substr(0, entry.find('='))] = entry.substr(entry.find('=') + 1);
  }
  return env;
}

class DraPrepareTest : public DraDriverTest {
 protected:
  std::string Uuid(int gpu) {
    simquery::Snapshot snap;
    std::string error;
    EXPECT_TRUE(simquery::TakeSnapshot(state_path(), &snap, &error)) << error;
    return snap.devices.at(gpu).uuid;
  }
  size_t SpecFiles() { return Files("cdi"); }
  nlohmann::json Checkpoint() { return ReadJson(dir_ + "/plugin/checkpoint.json"); }
};

const nlohmann::json kLatency50 = {{"apiVersion", "gpu.gpuslice.io/v1alpha1"},
                                   {"kind", "GpuSliceConfig"},
                                   {"computeClass", "latency"},
                                   {"computeLimit", 50}};

TEST_F(DraPrepareTest, RegistersAsADraPluginOfVersionV1) {
  const auto info = kubelet_->info();
  EXPECT_EQ(info.type(), "DRAPlugin");
  EXPECT_EQ(info.name(), "gpu.gpuslice.io");
  ASSERT_EQ(info.supported_versions_size(), 2);
  EXPECT_EQ(info.supported_versions(0), "v1.DRAPlugin") << "the first is the kubelet's choice";
  EXPECT_EQ(info.supported_versions(1), "v1alpha1.DRAResourceHealth") << "the health stream is served";
  EXPECT_EQ(info.endpoint(), dir_ + "/plugin/dra.sock");
  for (int i = 0; i < 50 && driver_->StderrSoFar().find("registered with the kubelet") == std::string::npos; ++i)
    usleep(100000);
  EXPECT_NE(driver_->StderrSoFar().find("registered with the kubelet"), std::string::npos);
}

TEST_F(DraPrepareTest, APreparedClaimGetsACdiSpecOfItsBookedMemoryAndCompute) {
  const ClaimSpec spec{.name = "train",
                       .uid = "0b6c7a52-1111-4f00-9000-000000000001",
                       .device = "gpu-1",
                       .memory = "4Gi",
                       .compute = "30",
                       .config = nlohmann::json::array({OpaqueConfig("FromClaim", kLatency50)})};
  api_->SetClaim(MakeClaim(spec));
  const auto answer = PrepareOne(spec);
  ASSERT_EQ(answer.error(), "");
  ASSERT_EQ(answer.devices_size(), 1);
  EXPECT_EQ(answer.devices(0).pool_name(), "node-a");
  EXPECT_EQ(answer.devices(0).device_name(), "gpu-1");
  ASSERT_EQ(answer.devices(0).request_names_size(), 1);
  EXPECT_EQ(answer.devices(0).request_names(0), "gpu");
  ASSERT_EQ(answer.devices(0).cdi_device_ids_size(), 1);
  EXPECT_EQ(answer.devices(0).share_id(), ShareIdOf(spec));
  EXPECT_EQ(answer.devices(0).cdi_device_ids(0), "gpuslice.io/claim=" + spec.uid + "-gpu-1-" + ShareIdOf(spec));
  const auto cdi = ReadJson(SpecPath(spec.uid));
  ASSERT_FALSE(cdi.is_discarded());
  EXPECT_EQ(SchemaErrors("cdi", cdi), "");
  EXPECT_EQ(cdi["kind"], "gpuslice.io/claim");
  EXPECT_EQ(cdi["devices"][0]["name"], spec.uid + "-gpu-1-" + ShareIdOf(spec));
  const auto env = EnvOf(cdi);
  EXPECT_EQ(env.at("GPUSLICE_MEMORY_LIMIT"), "4Gi");
  EXPECT_EQ(env.at("GPUSLICE_COMPUTE_REQUEST"), "30");
  EXPECT_EQ(env.at("GPUSLICE_COMPUTE_CLASS"), "latency");
  EXPECT_EQ(env.at("GPUSLICE_COMPUTE_LIMIT"), "50");
  EXPECT_EQ(env.at("GPUSLICE_TENANT"), "default.train");
  EXPECT_EQ(env.at("GPUSLICE_STATE_DIR"), dir_ + "/state");
  EXPECT_EQ(env.at("LD_PRELOAD"), ShimPath());
  EXPECT_EQ(env.at("NVIDIA_VISIBLE_DEVICES"), Uuid(1));
  const auto& mounts = cdi["devices"][0]["containerEdits"]["mounts"];
  ASSERT_EQ(mounts.size(), 2u);
  EXPECT_EQ(mounts[0]["hostPath"], ShimPath());
  EXPECT_EQ(mounts[1]["hostPath"], dir_ + "/state");
  EXPECT_EQ(CheckpointClaims(), 1u);
}

// The class's configuration applies unless the claim's overrides it; a claim with no
// consumedCapacity (allocated without consumable capacity) has the whole device.
TEST_F(DraPrepareTest, TheClaimsConfigurationOverridesTheClasssAndNoConsumedCapacityIsTheWholeDevice) {
  const nlohmann::json background = {{"apiVersion", "gpu.gpuslice.io/v1alpha1"},
                                     {"kind", "GpuSliceConfig"},
                                     {"computeClass", "background"},
                                     {"computeLimit", 100}};
  const nlohmann::json latency = {{"apiVersion", "gpu.gpuslice.io/v1alpha1"},
                                  {"kind", "GpuSliceConfig"},
                                  {"computeClass", "latency"}};
  const ClaimSpec spec{.name = "whole",
                       .uid = "0b6c7a52-1111-4f00-9000-000000000002",
                       .memory = "",
                       .compute = "",  // no consumedCapacity: allocated without consumable capacity
                       .config = nlohmann::json::array(
                           {OpaqueConfig("FromClaim", latency), OpaqueConfig("FromClass", background)})};
  api_->SetClaim(MakeClaim(spec));
  const auto answer = PrepareOne(spec);
  ASSERT_EQ(answer.error(), "");
  const auto env = EnvOf(ReadJson(SpecPath(spec.uid)));
  EXPECT_EQ(env.at("GPUSLICE_COMPUTE_CLASS"), "latency") << "the claim's over the class's";
  EXPECT_EQ(env.at("GPUSLICE_COMPUTE_LIMIT"), "100") << "the class's, which the claim leaves";
  EXPECT_EQ(env.at("GPUSLICE_MEMORY_LIMIT"), "16Gi");
  EXPECT_EQ(env.at("GPUSLICE_COMPUTE_REQUEST"), "100");
  EXPECT_FALSE(answer.devices(0).has_share_id()) << "a whole device is no share";
  EXPECT_EQ(answer.devices(0).cdi_device_ids(0), "gpuslice.io/claim=" + spec.uid + "-gpu-0");
}

// Two claims sharing one device (consumable capacity), prepared in one call as the kubelet does
// for a pod of two claims: each answer carries its allocation's share_id, and each share has a
// CDI device and an environment of its own (its tenant, its booked memory and compute) on the
// same GPU, so that one never overrides the other in a container that holds both.
TEST_F(DraPrepareTest, TwoClaimsSharingOneDeviceGetTheirShareIdsAndCdiDevicesAndEnvironmentsOfTheirOwn) {
  const ClaimSpec a{.name = "share-a", .uid = "0b6c7a52-2222-4f00-9000-00000000000a", .memory = "3Gi", .compute = "20"};
  const ClaimSpec b{.name = "share-b", .uid = "0b6c7a52-2222-4f00-9000-00000000000b", .memory = "5Gi", .compute = "45"};
  ASSERT_NE(ShareIdOf(a), ShareIdOf(b));
  api_->SetClaim(MakeClaim(a));
  api_->SetClaim(MakeClaim(b));
  drapb::NodePrepareResourcesResponse response;
  const auto status = kubelet_->Prepare({ClaimOf(a), ClaimOf(b)}, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  std::set<std::string> cdi_ids, tenants;
  for (const ClaimSpec& spec : {a, b}) {
    ASSERT_EQ(response.claims().count(spec.uid), 1u);
    const auto& answer = response.claims().at(spec.uid);
    ASSERT_EQ(answer.error(), "");
    ASSERT_EQ(answer.devices_size(), 1);
    EXPECT_EQ(answer.devices(0).device_name(), "gpu-0");
    ASSERT_TRUE(answer.devices(0).has_share_id()) << spec.name;
    EXPECT_EQ(answer.devices(0).share_id(), ShareIdOf(spec)) << spec.name;
    cdi_ids.insert(answer.devices(0).cdi_device_ids(0));
    const auto cdi = ReadJson(SpecPath(spec.uid));
    EXPECT_EQ(SchemaErrors("cdi", cdi), "");
    EXPECT_EQ("gpuslice.io/claim=" + cdi["devices"][0]["name"].get<std::string>(), answer.devices(0).cdi_device_ids(0));
    const auto env = EnvOf(cdi);
    tenants.insert(env.at("GPUSLICE_TENANT"));
    EXPECT_EQ(env.at("GPUSLICE_MEMORY_LIMIT"), spec.memory);
    EXPECT_EQ(env.at("GPUSLICE_COMPUTE_REQUEST"), spec.compute);
    EXPECT_EQ(env.at("NVIDIA_VISIBLE_DEVICES"), Uuid(0)) << "one GPU, two shares";
  }
  EXPECT_EQ(cdi_ids.size(), 2u);
  EXPECT_EQ(tenants, (std::set<std::string>{"default.share-a", "default.share-b"}));
  EXPECT_EQ(SpecFiles(), 2u);
  // A restarted driver answers from its checkpoint with the same shares.
  EXPECT_EQ(Checkpoint()["claims"][a.uid]["devices"][0]["shareID"], ShareIdOf(a));
}

// A device allocated for a firstAvailable subrequest ("gpu/small") is answered for its request
// ("gpu"): the kubelet matches devices to containers by the request's own name.
TEST_F(DraPrepareTest, ADeviceOfASubrequestIsAnsweredForItsRequest) {
  const ClaimSpec spec{.name = "sub",
                       .uid = "0b6c7a52-1111-4f00-9000-000000000005",
                       .memory = "1Gi",
                       .compute = "10",
                       .request = "gpu/small"};
  api_->SetClaim(MakeClaim(spec));
  const auto answer = PrepareOne(spec);
  ASSERT_EQ(answer.error(), "");
  ASSERT_EQ(answer.devices(0).request_names_size(), 1);
  EXPECT_EQ(answer.devices(0).request_names(0), "gpu");
}

TEST_F(DraPrepareTest, PrepareIsIdempotentAndUnprepareRemovesTheSpecOnce) {
  const ClaimSpec spec{.name = "svc", .uid = "0b6c7a52-1111-4f00-9000-000000000003", .memory = "2Gi", .compute = "20"};
  api_->SetClaim(MakeClaim(spec));
  const auto first = PrepareOne(spec);
  const auto again = PrepareOne(spec);
  ASSERT_EQ(first.error(), "");
  EXPECT_EQ(first.SerializeAsString(), again.SerializeAsString());
  EXPECT_EQ(api_->claim_reads(), 1) << "a prepared claim is answered from the checkpoint";
  EXPECT_EQ(SpecFiles(), 1u);
  for (int round = 0; round < 2; ++round) {
    drapb::NodeUnprepareResourcesResponse response;
    ASSERT_TRUE(kubelet_->Unprepare({ClaimOf(spec)}, &response).ok());
    ASSERT_EQ(response.claims().count(spec.uid), 1u);
    EXPECT_EQ(response.claims().at(spec.uid).error(), "") << "round " << round;
    EXPECT_FALSE(std::filesystem::exists(SpecPath(spec.uid)));
    EXPECT_EQ(CheckpointClaims(), 0u);
  }
}

struct BadClaim {
  const char* what;
  ClaimSpec spec;
  const char* error;  // a part of the one-line error
};

TEST_F(DraPrepareTest, BadClaimsAreRefusedInOneLineAndChangeNothing) {
  const nlohmann::json unknown_field = {{"apiVersion", "gpu.gpuslice.io/v1alpha1"},
                                        {"kind", "GpuSliceConfig"},
                                        {"computeClas", "latency"}};
  const nlohmann::json bad_class = {{"apiVersion", "gpu.gpuslice.io/v1alpha1"},
                                    {"kind", "GpuSliceConfig"},
                                    {"computeClass", "turbo"}};
  const nlohmann::json limit_under = {{"apiVersion", "gpu.gpuslice.io/v1alpha1"},
                                      {"kind", "GpuSliceConfig"},
                                      {"computeLimit", 20}};
  const std::vector<BadClaim> cases = {
      {"a device this node does not have",
       {.name = "c1", .uid = "u-1", .device = "gpu-7", .memory = "1Gi", .compute = "10"},
       "claim default/c1 is allocated device gpu-7 of pool node-a, which node node-a does not have"},
      {"another node's pool",
       {.name = "c2", .uid = "u-2", .node = "node-b", .memory = "1Gi", .compute = "10"},
       "of pool node-b, which node node-a does not have"},
      {"more memory than the device",
       {.name = "c3", .uid = "u-3", .memory = "17Gi", .compute = "10"},
       "claim default/c3 consumes memory \"17Gi\" of gpu-0, which has 17179869184 bytes"},
      {"more compute than the device",
       {.name = "c4", .uid = "u-4", .memory = "1Gi", .compute = "150"},
       "claim default/c4 consumes compute \"150\" of gpu-0, which has 100 (percent)"},
      {"an unknown configuration field",
       {.name = "c5",
        .uid = "u-5",
        .memory = "1Gi",
        .compute = "10",
        .config = nlohmann::json::array({OpaqueConfig("FromClaim", unknown_field)})},
       "claim default/c5: its gpuslice configuration has an unknown field 'computeClas'"},
      {"an unknown compute class",
       {.name = "c6",
        .uid = "u-6",
        .memory = "1Gi",
        .compute = "10",
        .config = nlohmann::json::array({OpaqueConfig("FromClass", bad_class)})},
       "computeClass \"turbo\"; expected latency, standard or background"},
      {"a limit under the booking",
       {.name = "c7",
        .uid = "u-7",
        .memory = "1Gi",
        .compute = "30",
        .config = nlohmann::json::array({OpaqueConfig("FromClaim", limit_under)})},
       "books compute 30 under its configuration's computeLimit 20"},
  };
  for (const auto& c : cases) api_->SetClaim(MakeClaim(c.spec));
  // Not at the API server, and there with another UID (deleted and created again).
  const ClaimSpec missing{
      .name = "gone", .uid = "u-8", .memory = "1Gi", .compute = "10", .config = nlohmann::json::array()};
  ClaimSpec replaced{.name = "again", .uid = "u-9", .memory = "1Gi", .compute = "10"};
  api_->SetClaim(MakeClaim(replaced));
  replaced.uid = "u-9-old";
  std::vector<drapb::Claim> claims;
  for (const auto& c : cases) claims.push_back(ClaimOf(c.spec));
  claims.push_back(ClaimOf(missing));
  claims.push_back(ClaimOf(replaced));
  drapb::NodePrepareResourcesResponse response;
  ASSERT_TRUE(kubelet_->Prepare(claims, &response).ok());
  for (const auto& c : cases) {
    ASSERT_EQ(response.claims().count(c.spec.uid), 1u) << c.what;
    const auto& answer = response.claims().at(c.spec.uid);
    EXPECT_NE(answer.error().find(c.error), std::string::npos) << c.what << ": " << answer.error();
    EXPECT_EQ(answer.error().find('\n'), std::string::npos) << c.what;
    EXPECT_EQ(answer.devices_size(), 0) << c.what;
  }
  EXPECT_NE(response.claims().at("u-8").error().find("cannot read claim default/gone: HTTP 404"), std::string::npos)
      << response.claims().at("u-8").error();
  EXPECT_NE(response.claims().at("u-9-old").error().find("has UID u-9 at the API server, not u-9-old"),
            std::string::npos)
      << response.claims().at("u-9-old").error();
  EXPECT_EQ(SpecFiles(), 0u) << "nothing written";
  EXPECT_EQ(CheckpointClaims(), 0u);
}

// With the API server down: a clear error, nothing written; once it is back, the same call
// prepares the claim.
TEST_F(DraPrepareTest, AnUnreachableApiServerFailsThePrepareInOneLineAndChangesNothing) {
  const ClaimSpec spec{.name = "late", .uid = "0b6c7a52-1111-4f00-9000-000000000004", .memory = "1Gi", .compute = "10"};
  api_->SetClaim(MakeClaim(spec));
  const std::string url = api_->url();
  api_->Stop();
  const auto answer = PrepareOne(spec);
  EXPECT_NE(answer.error().find(
                "the API server at " + url +
                " did not answer GET /apis/resource.k8s.io/v1/namespaces/default/resourceclaims/late after 3 tries"),
            std::string::npos)
      << answer.error();
  EXPECT_EQ(SpecFiles(), 0u);
  EXPECT_EQ(CheckpointClaims(), 0u);
  api_ = std::make_unique<StandInApiServer>("", std::stoi(url.substr(url.rfind(':') + 1)));
  api_->SetClaim(MakeClaim(spec));
  EXPECT_EQ(PrepareOne(spec).error(), "");
  EXPECT_EQ(SpecFiles(), 1u);
}

// Killed mid-way (SIGKILL: no clean-up), the driver comes back with every prepared claim: the
// kubelet's repeated Prepare gets the same answer without a read of the claim (here the API
// server is even down), and Unprepare of a claim prepared before the restart removes its spec.
TEST_F(DraPrepareTest, ADriverRestartedMidWayKeepsEveryPreparedClaimAndPreparesNothingTwice) {
  const ClaimSpec a{.name = "a", .uid = "0b6c7a52-1111-4f00-9000-00000000000a", .memory = "3Gi", .compute = "30"};
  const ClaimSpec b{
      .name = "b", .uid = "0b6c7a52-1111-4f00-9000-00000000000b", .device = "gpu-1", .memory = "5Gi", .compute = "50"};
  api_->SetClaim(MakeClaim(a));
  api_->SetClaim(MakeClaim(b));
  const auto before_a = PrepareOne(a);
  const auto before_b = PrepareOne(b);
  ASSERT_EQ(before_a.error() + before_b.error(), "");
  const auto spec_a = ReadJson(SpecPath(a.uid));
  driver_->Kill(SIGKILL);
  driver_->Wait(10000);
  api_->Stop();
  StartAndRegister();
  EXPECT_NE(driver_->StderrSoFar().find("2 claims prepared before this start"), std::string::npos)
      << driver_->StderrSoFar();
  EXPECT_EQ(PrepareOne(a).SerializeAsString(), before_a.SerializeAsString());
  EXPECT_EQ(PrepareOne(b).SerializeAsString(), before_b.SerializeAsString());
  EXPECT_EQ(ReadJson(SpecPath(a.uid)), spec_a);
  EXPECT_EQ(SpecFiles(), 2u);
  drapb::NodeUnprepareResourcesResponse response;
  ASSERT_TRUE(kubelet_->Unprepare({ClaimOf(a)}, &response).ok());
  EXPECT_EQ(response.claims().at(a.uid).error(), "");
  EXPECT_FALSE(std::filesystem::exists(SpecPath(a.uid)));
  EXPECT_EQ(CheckpointClaims(), 1u);
}

// A kubeconfig's server and token (development; in a pod the service account's are used).
TEST_F(DraPrepareTest, AKubeconfigsServerAndTokenAreUsed) {
  driver_.reset();
  api_ = std::make_unique<StandInApiServer>("s3cret");
  std::ofstream(dir_ + "/kubeconfig") << "apiVersion: v1\nkind: Config\ncurrent-context: dev\n"
                                      << "clusters:\n- name: c\n  cluster:\n    server: " << api_->url() << "\n"
                                      << "contexts:\n- name: dev\n  context:\n    cluster: c\n    user: u\n"
                                      << "users:\n- name: u\n  user:\n    token: s3cret\n";
  driver_ = StartDriver(dir_, "", {"--kubeconfig", dir_ + "/kubeconfig"});
  ASSERT_TRUE(api_->WaitForSlices(1, 20000)) << driver_->StderrSoFar();
}

}  // namespace
}  // namespace gpuslice::testing

namespace gpuslice::testing {
namespace {

// The plugin directory is the driver's: created (with its parents, mode 0750) when missing, as
// the kubelet plugin helpers create it; the kubelet's registration directory is not, and a
// missing one is named with its flag.
TEST_F(DraPrepareTest, ItCreatesAMissingPluginDirectoryAndNamesAMissingRegistryDirectory) {
  const std::string plugin_dir = dir_ + "/made/by/driver";
  std::filesystem::create_directory(dir_ + "/registry2");
  auto second = StartDriver(dir_, api_->url(), {"--plugin-dir", plugin_dir, "--registry-dir", dir_ + "/registry2"});
  ASSERT_TRUE(second->WaitForOutput("serving", 20000)) << second->StderrSoFar();
  struct stat st {};
  ASSERT_EQ(stat(plugin_dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0750u);
  EXPECT_TRUE(std::filesystem::exists(plugin_dir + "/dra.sock"));
  second.reset();

  auto refused =
      StartDriver(dir_, api_->url(), {"--plugin-dir", dir_ + "/plugin3", "--registry-dir", dir_ + "/no-such-registry"});
  const ProcessResult r = refused->Wait(20000);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--registry-dir " + dir_ + "/no-such-registry is not a directory"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace gpuslice::testing
