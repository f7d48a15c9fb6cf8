// What a claim (the API server's answer about it) or the kubelet's call can hold never takes the
// DRA driver beyond what the claim was booked: every claim of a call gets its own answer whatever
// another holds; a field of the wrong type, a consumedCapacity that is not an object of memory and
// compute, a UID that is no UID, or a UID the node prepared under another name is refused in one
// line with nothing written; no claim shares another's tenant, whatever it is named; quantities
// are read in every form of the Kubernetes grammar; and what a killed driver left half-written is
// removed at the next start.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <set>

#include <gtest/gtest.h>

#include "common/quantity.h"
#include "dra/tenant_name.h"
#include "tests/dra/dra_driver_fixture.h"

namespace gpuslice::testing {
namespace {

using nlohmann::json;

class DraHostileClaimsTest : public DraDriverTest {
 protected:
  // The error of `uid`'s answer, with a check that it is one line and prepared nothing.
  std::string Refused(const drapb::NodePrepareResourcesResponse& response, const std::string& uid) {
    if (!response.claims().count(uid)) return "(no answer)";
    const auto& answer = response.claims().at(uid);
    EXPECT_EQ(answer.devices_size(), 0) << uid;
    EXPECT_EQ(answer.error().find('\n'), std::string::npos) << uid << ": " << answer.error();
    EXPECT_FALSE(std::filesystem::exists(SpecPath(uid))) << uid;
    return answer.error();
  }
};

const ClaimSpec kGood{.name = "good", .uid = "0b6c7a52-4747-4f00-9000-000000000001", .memory = "2Gi", .compute = "20"};

// A claim with one field of the wrong type beside a good one, in one call: before, the numeric
// metadata.uid threw out of the call and the good claim got no answer either.
TEST_F(DraHostileClaimsTest, EveryClaimOfACallIsAnsweredWhateverAnotherClaimHolds) {
  struct Bad {
    std::string uid;
    std::function<void(json*)> spoil;
    const char* error;
  };
  const std::vector<Bad> bad = {
      {"u-numeric-uid", [](json* c) { (*c)["metadata"]["uid"] = 12345; }, "metadata.uid is 12345; expected a string"},
      {"u-numeric-driver", [](json* c) { (*c)["status"]["allocation"]["devices"]["results"][0]["driver"] = 7; },
       "status.allocation.devices.results[0].driver is 7; expected a string"},
      {"u-results-object",
       [](json* c) {
         (*c)["status"]["allocation"]["devices"]["results"] = {{"a", 1}};
       },
       "status.allocation.devices.results is {\"a\":1}; expected a list"},
      {"u-config-requests",
       [](json* c) {
         (*c)["status"]["allocation"]["devices"]["config"] = {
             {{"source", "FromClaim"}, {"requests", {1}}, {"opaque", {{"driver", "gpu.gpuslice.io"}}}}};
       },
       "status.allocation.devices.config[0].requests[0] is 1; expected a request's name"},
      {"u-status-string", [](json* c) { (*c)["status"] = "allocated"; }, "status is \"allocated\"; expected an object"},
  };
  api_->SetClaim(MakeClaim(kGood));
  std::vector<drapb::Claim> claims = {ClaimOf(kGood)};
  for (const Bad& b : bad) {
    const ClaimSpec spec{.name = b.uid.substr(2), .uid = b.uid, .memory = "1Gi", .compute = "10"};
    json claim = MakeClaim(spec);
    b.spoil(&claim);
    api_->SetClaim(claim);
    claims.push_back(ClaimOf(spec));
  }
  const auto response = Prepare(claims);
  ASSERT_EQ(response.claims().count(kGood.uid), 1u);
  EXPECT_EQ(response.claims().at(kGood.uid).error(), "");
  EXPECT_EQ(response.claims().at(kGood.uid).devices_size(), 1);
  for (const Bad& b : bad) EXPECT_NE(Refused(response, b.uid).find(b.error), std::string::npos) << b.uid;
  EXPECT_EQ(Files("cdi"), 1u);
  EXPECT_EQ(CheckpointClaims(), 1u);
}

// Before, a claim over 63 characters became its first 50, '-' and its UID's head: a claim named
// exactly that (in the same namespace) got the same tenant, and so the other's quota and share.
TEST_F(DraHostileClaimsTest, AClaimNamedAfterAnothersShortenedTenantGetsATenantOfItsOwn) {
  const ClaimSpec longer{.claim_namespace = "team-a",
                         .name = std::string(60, 'a'),
                         .uid = "0b6c7a52-4747-4f00-9000-0000000000a1",
                         .memory = "2Gi",
                         .compute = "20"};
  api_->SetClaim(MakeClaim(longer));
  ASSERT_EQ(PrepareOne(longer).error(), "");
  const std::string taken = SpecEnv(longer.uid)["GPUSLICE_TENANT"];
  ASSERT_TRUE(taken.starts_with("team-a.")) << taken;
  EXPECT_LE(taken.size(), 63u);
  // The impostor is named after whatever the first claim's tenant is.
  const ClaimSpec impostor{.claim_namespace = "team-a",
                           .name = taken.substr(7),
                           .uid = "0b6c7a52-4747-4f00-9000-0000000000a2",
                           .device = "gpu-1",
                           .memory = "1Gi",
                           .compute = "10"};
  api_->SetClaim(MakeClaim(impostor));
  ASSERT_EQ(PrepareOne(impostor).error(), "");
  EXPECT_NE(SpecEnv(impostor.uid)["GPUSLICE_TENANT"], taken);
}

// The naming rule itself, over names of every length around the cut and names that are not
// Kubernetes names: each pair gets a valid tenant of its own.
TEST(DraTenantNameTest, EveryClaimGetsAValidTenantOfItsOwn) {
  std::mt19937 random(47);
  std::set<std::pair<std::string, std::string>> claims;
  for (size_t length = 1; length <= 120; ++length) {
    for (int i = 0; i < 20; ++i) {
      std::string name;
      for (size_t k = 0; k < length; ++k) name += "ab.-_9Z"[random() % 7];
      claims.insert({"ns", name});
      claims.insert({"team-" + std::to_string(i), name});
    }
    claims.insert({"ns", std::string(length, 'a')});
    claims.insert({std::string(length, 'n'), "c"});
  }
  // And a claim named after each one's tenant, in its namespace: the impostor of the test above.
  for (const auto& [ns, name] : std::set(claims)) {
    const std::string tenant = dra::TenantName(ns, name);
    if (tenant.starts_with(ns + ".")) claims.insert({ns, tenant.substr(ns.size() + 1)});
  }
  std::map<std::string, std::pair<std::string, std::string>> tenants;
  for (const auto& [ns, name] : claims) {
    const std::string tenant = dra::TenantName(ns, name);
    EXPECT_TRUE(!tenant.empty() && tenant.size() <= 63) << tenant;
    EXPECT_EQ(tenant.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-"),
              std::string::npos)
        << tenant;
    const auto [it, fresh] = tenants.emplace(tenant, std::pair{ns, name});
    EXPECT_TRUE(fresh) << ns << "/" << name << " and " << it->second.first << "/" << it->second.second << " share "
                       << tenant;
  }
  EXPECT_EQ(dra::TenantName("default", "train"), "default.train");
}

// Before, only digits with a suffix were read: 1e9 and 2E9, which the API server writes for a
// quantity asked that way, were refused.
TEST_F(DraHostileClaimsTest, QuantitiesInEveryFormOfTheKubernetesGrammarAreRead) {
  const ClaimSpec exponent{.name = "exp",
                           .uid = "0b6c7a52-4747-4f00-9000-0000000000b1",
                           .memory = "1e9",
                           .compute = "3e1"};
  const ClaimSpec upper{.name = "upper",
                        .uid = "0b6c7a52-4747-4f00-9000-0000000000b2",
                        .memory = "2E9",
                        .compute = "20"};
  const ClaimSpec fraction{.name = "fraction",
                           .uid = "0b6c7a52-4747-4f00-9000-0000000000b3",
                           .memory = "1.5Gi",
                           .compute = "10"};
  for (const ClaimSpec& spec : {exponent, upper, fraction}) api_->SetClaim(MakeClaim(spec));
  const auto response = Prepare({ClaimOf(exponent), ClaimOf(upper), ClaimOf(fraction)});
  const std::map<std::string, std::pair<uint64_t, std::string>> expected = {{exponent.uid, {1'000'000'000, "30"}},
                                                                            {upper.uid, {2'000'000'000, "20"}},
                                                                            {fraction.uid, {3ULL << 29, "10"}}};
  for (const auto& [uid, booked] : expected) {
    ASSERT_EQ(response.claims().at(uid).error(), "") << uid;
    const auto env = SpecEnv(uid);
    EXPECT_EQ(ParseByteQuantity(env.at("GPUSLICE_MEMORY_LIMIT")), booked.first) << env.at("GPUSLICE_MEMORY_LIMIT");
    EXPECT_EQ(env.at("GPUSLICE_COMPUTE_REQUEST"), booked.second);
  }
}

// Before, a consumedCapacity that was not an object, or had no memory, gave the claim the whole
// device: whatever it booked, it fails closed now.
TEST_F(DraHostileClaimsTest, AConsumedCapacityWithoutMemoryAndComputeIsRefusedNotTheWholeDevice) {
  const std::vector<std::pair<json, const char*>> consumed = {
      {json::array({{{"memory", "1Gi"}}}), "consumedCapacity is [{\"memory\":\"1Gi\"}]; expected an object"},
      {json{{"compute", "10"}}, "without its memory"},
      {json{{"memory", "1Gi"}}, "without its compute"},
      {json::object(), "without its memory"},
      {json("10Gi"), "consumedCapacity is \"10Gi\"; expected an object"},
      {json{{"memory", json::array({"1Gi"})}, {"compute", "10"}}, "consumes memory [\"1Gi\"]"},
      {json{{"memory", "100m"}, {"compute", "10"}}, "consumes memory \"100m\" of gpu-0: not a whole number of bytes"},
  };
  std::vector<drapb::Claim> claims;
  for (size_t i = 0; i < consumed.size(); ++i) {
    const ClaimSpec spec{.name = "c" + std::to_string(i),
                         .uid = "u-consumed-" + std::to_string(i),
                         .memory = "1Gi",
                         .compute = "10"};
    json claim = MakeClaim(spec);
    claim["status"]["allocation"]["devices"]["results"][0]["consumedCapacity"] = consumed[i].first;
    api_->SetClaim(claim);
    claims.push_back(ClaimOf(spec));
  }
  // A share (a shareID) with no consumedCapacity at all.
  const ClaimSpec share{.name = "share", .uid = "u-share-no-consumed", .memory = "1Gi", .compute = "10"};
  json claim = MakeClaim(share);
  claim["status"]["allocation"]["devices"]["results"][0].erase("consumedCapacity");
  api_->SetClaim(claim);
  claims.push_back(ClaimOf(share));
  const auto response = Prepare(claims);
  for (size_t i = 0; i < consumed.size(); ++i) {
    const std::string error = Refused(response, "u-consumed-" + std::to_string(i));
    EXPECT_NE(error.find(consumed[i].second), std::string::npos) << consumed[i].first.dump() << ": " << error;
  }
  EXPECT_NE(Refused(response, share.uid).find("records no consumedCapacity"), std::string::npos);
  EXPECT_EQ(Files("cdi"), 0u);
  EXPECT_EQ(CheckpointClaims(), 0u);
}

// Before, an empty UID or one with a newline was prepared into a CDI device name the runtime
// refuses ("-gpu-0-…", or one of two lines); a UID that is no UID is refused now, at prepare and
// unprepare, and the good claim beside it is prepared.
TEST_F(DraHostileClaimsTest, AUidThatIsNoUidIsRefusedAndNothingIsWritten) {
  const std::vector<std::string> uids = {"",          "a\nb",       "../outside",        "-leading",
                                         "trailing-", "with space", std::string(65, 'f')};
  api_->SetClaim(MakeClaim(kGood));
  std::vector<drapb::Claim> claims = {ClaimOf(kGood)};
  for (size_t i = 0; i < uids.size(); ++i) {
    const ClaimSpec spec{.name = "bad-uid-" + std::to_string(i), .uid = uids[i], .memory = "1Gi", .compute = "10"};
    api_->SetClaim(MakeClaim(spec));  // the API server agrees: only the UID's form is wrong
    claims.push_back(ClaimOf(spec));
  }
  const auto response = Prepare(claims);
  EXPECT_EQ(response.claims().at(kGood.uid).error(), "");
  for (const std::string& uid : uids) {
    EXPECT_NE(Refused(response, uid).find("expected 1 to 64 letters, digits and '-'"), std::string::npos) << uid;
  }
  EXPECT_EQ(Files("cdi"), 1u);
  drapb::NodeUnprepareResourcesResponse unprepared;
  ASSERT_TRUE(kubelet_->Unprepare({claims[2]}, &unprepared).ok());
  EXPECT_NE(unprepared.claims().at("a\nb").error().find("expected 1 to 64"), std::string::npos);
}

// Before, the checkpoint was looked up by UID alone: another claim given a prepared claim's UID
// got that claim's devices (its CDI devices, its tenant) without a read of its own.
TEST_F(DraHostileClaimsTest, AUidPreparedForOneClaimIsRefusedForAnother) {
  api_->SetClaim(MakeClaim(kGood));
  ASSERT_EQ(PrepareOne(kGood).error(), "");
  ClaimSpec other = kGood;
  other.name = "other";
  api_->SetClaim(MakeClaim(other));
  const auto answer = Prepare({ClaimOf(other)}).claims().at(other.uid);
  EXPECT_EQ(answer.devices_size(), 0);
  EXPECT_NE(answer.error().find("claim default/other has UID " + kGood.uid +
                                ", which this node prepared for claim default/good"),
            std::string::npos)
      << answer.error();
  drapb::NodeUnprepareResourcesResponse unprepared;
  ASSERT_TRUE(kubelet_->Unprepare({ClaimOf(other)}, &unprepared).ok());
  EXPECT_NE(unprepared.claims().at(other.uid).error().find("prepared for claim default/good"), std::string::npos);
  EXPECT_TRUE(std::filesystem::exists(SpecPath(kGood.uid))) << "the other claim's unprepare removed nothing";
  EXPECT_EQ(CheckpointClaims(), 1u);
}

// A driver killed between writing and renaming leaves "<file>.tmp.<pid>"; the next start removes
// those of writers that are gone, and nothing else.
TEST_F(DraHostileClaimsTest, TemporariesOfAKilledDriverAreRemovedAtTheNextStart) {
  driver_->Kill(SIGKILL);
  driver_->Wait(10000);
  const pid_t gone = fork();
  if (gone == 0) _exit(0);
  ASSERT_GT(gone, 0);
  ASSERT_EQ(waitpid(gone, nullptr, 0), gone);
  const std::string dead = std::to_string(gone), alive = std::to_string(getpid());
  const std::vector<std::string> stale = {"plugin/checkpoint.json.tmp." + dead,
                                          "cdi/gpuslice.io-claim_0b6c7a52.json.tmp." + dead};
  const std::vector<std::string> kept = {"plugin/checkpoint.json.tmp." + alive,  // a live writer's
                                         "cdi/gpuslice.io-claim_0b6c7a52.json.tmp." + alive,
                                         "cdi/other-vendor.json.tmp." + dead};  // not the driver's
  for (const auto& name : stale) std::ofstream(dir_ + "/" + name) << "{\"half\":";
  for (const auto& name : kept) std::ofstream(dir_ + "/" + name) << "{\"half\":";
  StartAndRegister();
  for (const auto& name : stale) {
    EXPECT_FALSE(std::filesystem::exists(dir_ + "/" + name)) << name;
    EXPECT_NE(driver_->StderrSoFar().find(name.substr(name.find('/') + 1) + ", left by a driver killed"),
              std::string::npos)
        << driver_->StderrSoFar();
  }
  for (const auto& name : kept) EXPECT_TRUE(std::filesystem::exists(dir_ + "/" + name)) << name;
  api_->SetClaim(MakeClaim(kGood));
  EXPECT_EQ(PrepareOne(kGood).error(), "") << "and it prepares as before";
}

}  // namespace
}  // namespace gpuslice::testing
