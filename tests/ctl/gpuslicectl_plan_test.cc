// `gpuslicectl plan` run as operators run it, its plans checked by doing them: each plan's MIG
// layout is created on the simulated GPU (GPUSLICE_SIM_MIG), and every tenant is started there
// with the plan's GPUSLICE_* variables under the preloaded shim, in its instance, all tenants of
// a unit at once, each holding its whole quota. Tiers never share a GPU over random tenant lists;
// impossible requests get one line and exit 3; and a control shows the isolation rule at work:
// a hostile tenant without the preload takes only its MIG instance's memory, where as a soft
// slice (the same tenants, the rule switched off by calling it trusted) it starves its neighbour.
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include "common/quantity.h"
#include "gpu/mig_profiles.h"
#include "gpuslice/sim_query.h"
#include "tests/support/shim_fixture.h"

namespace gpuslice::testing {
namespace {

using ::testing::HasSubstr;

std::string Ctl() { return BinDir() + "/gpuslicectl"; }

class GpuslicectlPlanTest : public ShimTest {
 protected:
  void TearDown() override {
    for (const auto& path : extra_states_) unlink(path.c_str());
    ShimTest::TearDown();
  }

  // Writes `text` to a file of this test and returns its path.
  std::string WriteTenants(const std::string& text) {
    const std::string path = state_dir() + "/tenants-" + std::to_string(files_++) + ".yaml";
    std::ofstream(path) << text;
    return path;
  }

  ProcessResult Plan(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {Ctl(), "plan"};
    argv.insert(argv.end(), args.begin(), args.end());
    return gpuslice::testing::Run(argv);
  }

  Json PlanJson(const std::string& tenants, const std::vector<std::string>& gpu_args) {
    auto args = gpu_args;
    args.insert(args.end(), {"--json", WriteTenants(tenants)});
    const ProcessResult r = Plan(args);
    EXPECT_EQ(r.exit_code, 0) << Describe(r);
    return Json::parse(r.out, nullptr, false);
  }

  // A fresh simulated GPU playing `gpu` of a plan: its model, its MIG layout or MPS. Returns the
  // CUDA_VISIBLE_DEVICES value of each of its units (a MIG-UUID, or "0" for the whole GPU).
  std::vector<std::string> SimulateGpu(const Json& gpu) {
    const std::string state = state_path() + "-gpu" + std::to_string(extra_states_.size());
    extra_states_.push_back(state);
    unlink(state.c_str());
    SetEnv("GPUSLICE_SIM_STATE", state);
    // UUIDs of their own: the broker of the test's state directory must not take one simulated
    // GPU for another.
    SetEnv("GPUSLICE_SIM_UUID_SEED", "plan-gpu-" + std::to_string(extra_states_.size()));
    SetEnv("GPUSLICE_SIM_MODEL", gpu["model"].get<std::string>());
    SetEnv("GPUSLICE_SIM_MIG", gpu["mode"] == "mig" ? gpu["mig_layout"].get<std::string>() : "");
    if (gpu["mode"] != "mig") unsetenv("GPUSLICE_SIM_MIG");
    SetEnv("GPUSLICE_SIM_MPS", gpu["mode"] == "mps" ? "1" : "0");
    // The simulator creates its devices at the first process's cuInit: the layout is accepted or
    // refused there (cuInit fails with one line).
    const ProcessResult first = gpuslice::testing::Run({App("direct"), "alloc", "--chunk", "1Mi", "--count", "1"},
                                                       {"LD_LIBRARY_PATH=" + SimLibDir()});
    EXPECT_EQ(first.exit_code, 0) << "the simulator refused the plan's GPU " << gpu.dump() << "\n" << Describe(first);
    simquery::Snapshot snap;
    std::string error;
    EXPECT_TRUE(simquery::TakeSnapshot(state, &snap, &error)) << error;
    std::vector<std::string> visible;
    if (gpu["mode"] != "mig") return {"0"};
    EXPECT_EQ(snap.devices.at(0).mig_instances.size(), gpu["units"].size());
    for (size_t u = 0; u < gpu["units"].size() && u < snap.devices[0].mig_instances.size(); ++u) {
      const auto& instance = snap.devices[0].mig_instances[u];
      EXPECT_EQ(instance.mig_profile, gpu["units"][u]["profile"].get<std::string>());
      EXPECT_EQ(instance.total_memory, gpu["units"][u]["memory_bytes"].get<uint64_t>());
      visible.push_back(instance.uuid);
    }
    return visible;
  }

  // Starts `tenant` of a plan in its unit, allocating its whole memory and holding it: with its
  // GPUSLICE_* variables under the shim (a soft slice, an MPS client), or plain (an instance of
  // its own is the limit). The holder's result is checked by CheckHolder.
  std::unique_ptr<Subprocess> StartTenant(const Json& tenant, const std::string& visible, uint64_t memory) {
    std::vector<std::string> argv = {App("direct"), "alloc", "--chunk", std::to_string(memory),
                                     "--count",     "1",     "--hold",  "60"};
    std::vector<std::string> env = {"CUDA_VISIBLE_DEVICES=" + visible, "LD_LIBRARY_PATH=" + SimLibDir()};
    for (const auto& [name, value] : tenant["env"].items()) env.push_back(name + "=" + value.get<std::string>());
    // The test's environment holds no preload and no GPUSLICE_* but the simulator's.
    auto p = tenant["env"].empty() ? std::make_unique<Subprocess>(argv, env) : StartShimmed(argv, env);
    EXPECT_TRUE(p->WaitForOutput("\"event\":\"holding\"", 30000)) << tenant["name"] << ": " << p->StdoutSoFar();
    return p;
  }

  std::vector<std::string> extra_states_;
  int files_ = 0;
};

// The tenant's memory from the plan's input (the test's own table).
uint64_t MemoryOf(const std::map<std::string, uint64_t>& memory, const Json& tenant) {
  return memory.at(tenant["name"].get<std::string>());
}

constexpr char kMixedTenants[] = R"(tenants:
  - {name: bank, memory: 30Gi, compute: 40, trusted: false, tier: paid}
  - {name: ledger, memory: 10Gi, compute: 10, trusted: true, fault_tolerant: false, tier: paid}
  - {name: search, memory: 12Gi, compute: 20, latency_ms: 50, trusted: true, fault_tolerant: true, tier: paid}
  - {name: notebook, memory: 8Gi, compute: 10, trusted: true, fault_tolerant: true, tier: paid}
  - {name: ads, memory: 16Gi, compute: 30, latency_ms: 5, trusted: true, fault_tolerant: true, tier: free}
  - {name: batch, memory: 40Gi, compute: 40, trusted: true, fault_tolerant: true, tier: free}
  - {name: ci, memory: 6Gi, compute: 10, trusted: true, fault_tolerant: true, tier: free}
)";
const std::map<std::string, uint64_t> kMixedMemory = {{"bank", 30 * kGi},    {"ledger", 10 * kGi}, {"search", 12 * kGi},
                                                      {"notebook", 8 * kGi}, {"ads", 16 * kGi},    {"batch", 40 * kGi},
                                                      {"ci", 6 * kGi}};

TEST_F(GpuslicectlPlanTest, EveryPlanItPrintsRunsOnTheSimulatorWithTheShimAcceptingItsVariables) {
  for (const std::string model : {"h200", "a100-40"}) {
    SCOPED_TRACE(model);
    const Json plan = PlanJson(kMixedTenants, {"--model", model, "--gpus", "4"});
    ASSERT_TRUE(plan.is_object());
    ASSERT_EQ(plan["tenants"].size(), kMixedMemory.size());
    for (size_t g = 0; g < plan["gpus"].size(); ++g) {
      const Json& gpu = plan["gpus"][g];
      SCOPED_TRACE(gpu.dump());
      const std::vector<std::string> visible = SimulateGpu(gpu);
      for (size_t u = 0; u < gpu["units"].size() && u < visible.size(); ++u) {
        // Every tenant of the unit at once, each holding its whole quota: the plan's memory holds.
        std::vector<std::pair<Json, std::unique_ptr<Subprocess>>> running;
        for (const Json& tenant : plan["tenants"]) {
          if (tenant["gpu"] != g || tenant["unit"] != u) continue;
          running.emplace_back(tenant, StartTenant(tenant, visible[u], MemoryOf(kMixedMemory, tenant)));
        }
        ASSERT_FALSE(running.empty()) << "unit " << u << " has no tenant";
        for (auto& [tenant, process] : running) {
          const ProcessResult r = Stop(*process);
          SCOPED_TRACE(tenant.dump());
          EXPECT_EQ(r.exit_code, 0) << Describe(r);
          EXPECT_TRUE(GpusliceLines(r.err).empty()) << "the shim refused the plan's variables: " << r.err;
          const Json result = ResultOf(r);
          EXPECT_EQ(result.value("allocated", -1), 1) << r.out;
          // Under the shim cuMemGetInfo shows the quota: the variables were read and applied.
          const uint64_t total = result["mem_before"].value("total", uint64_t{0});
          if (!tenant["env"].empty()) {
            EXPECT_EQ(total, MemoryOf(kMixedMemory, tenant)) << r.out;
          } else {
            EXPECT_EQ(total, gpu["units"][u]["memory_bytes"].get<uint64_t>()) << r.out;
          }
        }
      }
    }
  }
}

TEST_F(GpuslicectlPlanTest, PlacesEachTenantAsItsTrustFaultToleranceAndLatencyRequire) {
  const Json plan = PlanJson(kMixedTenants, {"--model", "h200", "--gpus", "4"});
  std::map<std::string, Json> by_name;
  for (const Json& t : plan["tenants"]) by_name[t["name"]] = t;
  EXPECT_EQ(by_name["bank"]["placement"], "mig-instance");    // untrusted
  EXPECT_EQ(by_name["ledger"]["placement"], "mig-instance");  // fault-intolerant
  EXPECT_EQ(by_name["search"]["placement"], "soft-slice");    // 50 ms: time-slicing will do
  EXPECT_EQ(by_name["search"]["env"]["GPUSLICE_COMPUTE_CLASS"], "latency");
  EXPECT_EQ(by_name["ads"]["placement"], "mps-client");  // 5 ms, trusted: concurrency
  EXPECT_EQ(by_name["ads"]["env"]["GPUSLICE_COMPUTE_LIMIT"], "30");
  EXPECT_EQ(by_name["batch"]["env"]["GPUSLICE_MEMORY_REQUEST"], "40Gi") << "what it needs is its request";
  EXPECT_EQ(by_name["batch"]["env"]["GPUSLICE_MEMORY_LIMIT"], "40Gi");
  EXPECT_EQ(by_name["bank"]["kubernetes"]["resources"].begin().key().rfind("nvidia.com/mig-", 0), 0u);
  // One resource, slices of one device: enough for the quota and the request.
  const auto& ci = by_name["ci"]["kubernetes"]["resources"];
  ASSERT_EQ(ci.size(), 1u) << ci.dump();
  EXPECT_GE(ci["gpuslice.io/gpu"].get<int>(),
            std::stoi(by_name["ci"]["env"]["GPUSLICE_COMPUTE_REQUEST"].get<std::string>()));
  EXPECT_LE(ci["gpuslice.io/gpu"].get<int>(), 100);
  EXPECT_THAT(by_name["bank"]["reason"].get<std::string>(), HasSubstr("untrusted"));
  // The text shows the same, with the reasons and what is left unused.
  const ProcessResult text = Plan({"--model", "h200", "--gpus", "4", WriteTenants(kMixedTenants)});
  ASSERT_EQ(text.exit_code, 0) << Describe(text);
  EXPECT_THAT(text.out, HasSubstr("GPUSLICE_TENANT=search GPUSLICE_MEMORY_REQUEST=12Gi GPUSLICE_MEMORY_LIMIT=12Gi"));
  EXPECT_THAT(text.out, HasSubstr("why: untrusted"));
  EXPECT_THAT(text.out, HasSubstr("unused:"));
  EXPECT_THAT(text.out, HasSubstr("outside the instances:"));
}

// Tenants are packed by what they need (their requests), however far they may borrow: two
// tenants of 60 GiB that may each borrow up to 140 GiB share one H200 (packed by their limits
// they would need two), each guaranteed its 60 GiB and allowed up to 140 GiB.
TEST_F(GpuslicectlPlanTest, PacksTenantsByTheirRequestsAndPassesTheirLimitsAsCeilings) {
  const Json plan = PlanJson(
      "tenants:\n"
      "  - {name: a, memory: 60Gi, memory_limit: 140Gi, compute: 30, trusted: true, fault_tolerant: true}\n"
      "  - {name: b, memory: 60Gi, memory_limit: 140Gi, compute: 30, trusted: true, fault_tolerant: true}\n",
      {"--model", "h200"});
  EXPECT_EQ(plan["gpus"].size(), 1u) << plan.dump(2);
  for (const Json& t : plan["tenants"]) {
    EXPECT_EQ(t["env"]["GPUSLICE_MEMORY_REQUEST"], "60Gi") << t.dump();
    EXPECT_EQ(t["env"]["GPUSLICE_MEMORY_LIMIT"], "140Gi") << t.dump();
  }
}

// The property: over random tenant lists, every plan keeps tiers apart, places every tenant once,
// isolates who needs it, and fits every unit (quotas within its memory, requests within 100%,
// the MIG layout valid for the model).
void ExpectPlanHolds(const Json& plan, const std::vector<Json>& tenants, const std::string& model_key) {
  std::map<std::string, Json> input;
  for (const Json& t : tenants) input[t["name"]] = t;
  std::map<std::string, int> placed;
  for (const Json& gpu : plan["gpus"]) {
    const std::string tier = gpu["tier"];
    if (gpu["mode"] == "mig") {
      const Result<std::vector<gpu::MigPlacement>> placements =
          gpu::ValidateMigLayout(*gpu::FindMigGpuModel(model_key), gpu["mig_layout"].get<std::string>());
      EXPECT_TRUE(placements.ok()) << placements.message();
    }
    for (const Json& unit : gpu["units"]) {
      uint64_t memory = 0;
      for (const Json& name : unit["tenants"]) {
        const Json& t = input.at(name.get<std::string>());
        EXPECT_EQ(t.value("tier", std::string("default")), tier) << "tiers mixed on a GPU: " << gpu.dump();
        memory += ParseByteQuantity(t["memory"].get<std::string>()).value();
        placed[name]++;
        const bool isolated = !t.value("trusted", false) || !t.value("fault_tolerant", false);
        if (isolated) {
          EXPECT_TRUE(!unit["shared"].get<bool>() && unit["tenants"].size() == 1u) << unit.dump();
        }
      }
      EXPECT_LE(memory, unit["memory_bytes"].get<uint64_t>()) << unit.dump();
    }
  }
  for (const Json& t : plan["tenants"]) {
    if (t["placement"] == "mig-instance") continue;
    EXPECT_EQ(t["env"]["GPUSLICE_TENANT"], t["name"]);
  }
  for (const Json& t : tenants) EXPECT_EQ(placed[t["name"]], 1) << t.dump();
  std::map<std::pair<size_t, size_t>, int> requests;
  for (const Json& t : plan["tenants"])
    requests[{t["gpu"].get<size_t>(), t["unit"].get<size_t>()}] += t["compute_request_percent"].get<int>();
  for (const auto& [unit, total] : requests) EXPECT_LE(total, 100);
}

TEST_F(GpuslicectlPlanTest, TiersNeverShareAGpuOverRandomTenantLists) {
  std::mt19937 rng(20261201);
  const std::vector<std::string> tiers = {"free", "paid", "internal"};
  for (int round = 0; round < 30; ++round) {
    const int n = 3 + static_cast<int>(rng() % 18);
    std::vector<Json> tenants;
    for (int i = 0; i < n; ++i) {
      Json t = {{"name", "t" + std::to_string(i)},  {"memory", std::to_string(1 + rng() % 60) + "Gi"},
                {"compute", 1 + rng() % 50},        {"trusted", rng() % 3 != 0},
                {"fault_tolerant", rng() % 4 != 0}, {"tier", tiers[rng() % tiers.size()]}};
      if (rng() % 3 == 0) t["latency_ms"] = 1 + rng() % 60;
      tenants.push_back(t);
    }
    const Json plan = PlanJson(Json{{"tenants", tenants}}.dump(), {"--model", "h200", "--gpus", "64"});
    SCOPED_TRACE(Json(tenants).dump());
    ASSERT_TRUE(plan.is_object());
    ExpectPlanHolds(plan, tenants, "H200");
  }
}

// The control of the property: a plan whose tiers are mixed is caught by it.
TEST_F(GpuslicectlPlanTest, ThePropertyCatchesAPlanThatMixesTiers) {
  const std::vector<Json> tenants = {
      {{"name", "a"}, {"memory", "1Gi"}, {"compute", 10}, {"trusted", true}, {"fault_tolerant", true}, {"tier", "x"}},
      {{"name", "b"}, {"memory", "1Gi"}, {"compute", 10}, {"trusted", true}, {"fault_tolerant", true}, {"tier", "y"}}};
  Json plan = PlanJson(Json{{"tenants", tenants}}.dump(), {"--model", "h200", "--gpus", "2"});
  ASSERT_EQ(plan["gpus"].size(), 2u);  // one GPU per tier
  plan["gpus"][0]["units"][0]["tenants"].push_back("b");
  plan["gpus"][1]["units"][0]["tenants"] = Json::array();
  ::testing::TestPartResultArray failures;
  {
    ::testing::ScopedFakeTestPartResultReporter reporter(
        ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &failures);
    ExpectPlanHolds(plan, tenants, "H200");
  }
  bool caught = false;
  for (int i = 0; i < failures.size(); ++i)
    caught = caught || std::string(failures.GetTestPartResult(i).message()).find("tiers mixed") != std::string::npos;
  EXPECT_TRUE(caught);
}

struct Impossible {
  const char* what;
  std::vector<std::string> args;
  const char* tenants;
  int exit_code;
  const char* says;
};

TEST_F(GpuslicectlPlanTest, ImpossibleOrBadRequestsGetOneLineAndNoPlan) {
  const std::vector<Impossible> cases = {
      {"more memory than the GPU",
       {"--model", "h200"},
       "tenants: [{name: big, memory: 200Gi, compute: 10, trusted: true, fault_tolerant: true}]",
       3,
       "needs 200 GiB of GPU memory; the largest GPU here (NVIDIA H200) has 140.4 GiB"},
      {"more instances than fit",
       {"--model", "h200", "--gpus", "1"},
       "tenants: [{name: a, memory: 1Gi, compute: 1}, {name: b, memory: 1Gi, compute: 1}, {name: c, memory: 1Gi, compute: 1},"
       " {name: d, memory: 1Gi, compute: 1}, {name: e, memory: 1Gi, compute: 1}, {name: f, memory: 1Gi, compute: 1},"
       " {name: g, memory: 1Gi, compute: 1}, {name: h, memory: 1Gi, compute: 1}]",
       3,
       "they need 2 GPUs"},
      {"two tiers, one GPU",
       {"--model", "a100-80", "--gpus", "1"},
       "tenants: [{name: a, memory: 1Gi, compute: 5, trusted: true, fault_tolerant: true, tier: free},"
       " {name: b, memory: 1Gi, compute: 5, trusted: true, fault_tolerant: true, tier: paid}]",
       3,
       "tiers never share a GPU: free 1, paid 1"},
      {"isolation beyond the largest instance",
       {"--model", "a100-80"},
       "tenants: [{name: whole, memory: 10Gi, compute: 100}]",
       3,
       "the largest, 7g.80gb, has 80 GiB and 98 of 108 SMs"},
      {"unknown field",
       {"--model", "h200"},
       "tenants: [{name: a, memory: 1Gi, compute: 5, trused: true}]",
       2,
       "unknown field 'trused'"},
      {"bad memory", {"--model", "h200"}, "tenants: [{name: a, memory: lots, compute: 5}]", 2, "invalid memory 'lots'"},
      {"a limit below the memory",
       {"--model", "h200"},
       "tenants: [{name: a, memory: 8Gi, memory_limit: 4Gi, compute: 5}]",
       2,
       "invalid memory_limit '4Gi'; expected a quantity at least its memory (8Gi)"},
      {"twice the same name",
       {"--model", "h200"},
       "tenants: [{name: a, memory: 1Gi, compute: 5}, {name: a, memory: 1Gi, compute: 5}]",
       2,
       "used twice"},
      {"bad tenant name",
       {"--model", "h200"},
       "tenants: [{name: 'a b', memory: 1Gi, compute: 5}]",
       2,
       "it becomes GPUSLICE_TENANT"},
      {"unknown model",
       {"--model", "t4"},
       "tenants: [{name: a, memory: 1Gi, compute: 5}]",
       2,
       "unknown --model 't4'; expected A100-40GB, A100-80GB, H100-80GB or H200 (GPUSLICE_SIM_MODEL's names"},
      {"ambiguous model",
       {"--model", "A100"},
       "tenants: [{name: a, memory: 1Gi, compute: 5}]",
       2,
       "--model 'A100' is ambiguous: A100-40GB or A100-80GB"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    auto args = c.args;
    args.push_back(WriteTenants(c.tenants));
    const ProcessResult r = Plan(args);
    EXPECT_EQ(r.exit_code, c.exit_code) << Describe(r);
    EXPECT_THAT(r.err, HasSubstr(c.says));
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_EQ(r.out, "");
  }
}

TEST_F(GpuslicectlPlanTest, ReadsTheGpuThroughNvmlAndRefusesIsolationWithoutMig) {
  SetEnv("GPUSLICE_SIM_MODEL", "A100-40GB");
  const std::string file = WriteTenants("tenants: [{name: a, memory: 4Gi, compute: 10, trusted: false}]");
  std::vector<std::string> env = {"LD_LIBRARY_PATH=" + SimLibDir()};
  ProcessResult r = gpuslice::testing::Run({Ctl(), "plan", "--gpu", "0", "--json", file}, env);
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  const Json plan = Json::parse(r.out);
  EXPECT_EQ(plan["gpus"][0]["model"], "A100-40GB");
  EXPECT_EQ(plan["gpus"][0]["uuid"].get<std::string>().rfind("GPU-", 0), 0u);
  EXPECT_EQ(plan["gpus"][0]["mig_layout"], "1g.5gb@0");

  // A GPU without MIG: an untrusted tenant has nowhere to go.
  unlink(state_path().c_str());
  unsetenv("GPUSLICE_SIM_MODEL");
  SetEnv("GPUSLICE_SIM_NAME", "NVIDIA T4 (simulated)");
  SetEnv("GPUSLICE_SIM_MEMORY", "16Gi");
  r = gpuslice::testing::Run({Ctl(), "plan", "--gpu", "0", file}, env);
  EXPECT_EQ(r.exit_code, 3) << Describe(r);
  EXPECT_THAT(r.err, HasSubstr("tenant 'a' is untrusted (trusted: false) and needs a MIG instance of its own, but no "
                               "GPU here is MIG-capable (NVIDIA T4 (simulated)"));
  r = gpuslice::testing::Run({Ctl(), "plan", "--gpu", "3", file}, env);
  EXPECT_EQ(r.exit_code, 1) << Describe(r);
  EXPECT_THAT(r.err, HasSubstr("NVML has no GPU 3"));
}

// The isolation rule at work. `intruder` is untrusted; a hostile tenant drops the preload. In the
// plan it gets a MIG instance, and takes nothing from `victim`'s memory. The control plans the
// same tenants with the rule off (the intruder called trusted): soft slices of one GPU, where the
// intruder without the preload takes the GPU's memory and the victim cannot allocate its quota.
TEST_F(GpuslicectlPlanTest, AnUntrustedTenantInItsInstanceCannotStarveItsNeighbourAsASoftSliceCan) {
  auto victim_gets_its_quota = [&](bool intruder_trusted) {
    const std::string tenants = std::string("tenants:\n") +
                                "  - {name: victim, memory: 40Gi, compute: 30, trusted: true, fault_tolerant: true}\n" +
                                "  - {name: intruder, memory: 20Gi, compute: 20, trusted: " +
                                (intruder_trusted ? "true" : "false") + ", fault_tolerant: true}\n";
    const Json plan = PlanJson(tenants, {"--model", "h200"});
    const Json& gpu = plan["gpus"][0];
    const std::vector<std::string> visible = SimulateGpu(gpu);
    std::map<std::string, Json> by_name;
    for (const Json& t : plan["tenants"]) by_name[t["name"]] = t;
    // The intruder, without the preload, takes every GiB its unit has.
    Subprocess intruder({App("direct"), "alloc", "--chunk", "1Gi", "--count", "200", "--hold", "60"},
                        {"CUDA_VISIBLE_DEVICES=" + visible.at(by_name["intruder"]["unit"].get<size_t>()),
                         "LD_LIBRARY_PATH=" + SimLibDir()});
    EXPECT_TRUE(intruder.WaitForOutput("\"event\":\"holding\"", 30000)) << intruder.StdoutSoFar();
    const Json& victim = by_name["victim"];
    auto v = StartTenant(victim, visible.at(victim["unit"].get<size_t>()), 40 * kGi);
    const ProcessResult r = Stop(*v);
    Stop(intruder);
    return ResultOf(r).value("allocated", -1) == 1;
  };
  EXPECT_TRUE(victim_gets_its_quota(/*intruder_trusted=*/false));
  EXPECT_FALSE(victim_gets_its_quota(/*intruder_trusted=*/true)) << "control: as a soft slice the intruder starves it";
}

// --help and docs/choosing.md in step with what the command reads and answers.
TEST_F(GpuslicectlPlanTest, HelpAndDocsNameEveryTenantFieldAndExitStatus) {
  const ProcessResult help = gpuslice::testing::Run({Ctl(), "plan", "--help"});
  ASSERT_EQ(help.exit_code, 0) << Describe(help);
  std::ifstream in(SourceDir() + "/docs/choosing.md");
  const std::string docs((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (const std::string field :
       {"name", "memory", "memory_limit", "compute", "latency_ms", "trusted", "fault_tolerant", "tier"}) {
    EXPECT_THAT(help.out, HasSubstr("\n  " + field + " ")) << field;
    EXPECT_THAT(docs, HasSubstr("| `" + field + "` |")) << field;
  }
  for (const std::string text : {"--model", "--gpus", "--gpu", "--json", "H200, H100-80GB, A100-80GB or A100-40GB",
                                 "Exit status: 0", "3 when the request cannot be met", "docs/choosing.md"}) {
    EXPECT_THAT(help.out, HasSubstr(text));
  }
  EXPECT_THAT(gpuslice::testing::Run({Ctl(), "--help"}).out, HasSubstr("plan"));
}

// The README's form, without --gpus: the fewest GPUs of the model that hold the tenants (the
// example's comment once carried the --gpus 3 it needed; without it the plan failed, "they need 3
// GPUs"). The model as the simulator names it, in the short forms and by the driver's name alike.
TEST_F(GpuslicectlPlanTest, WithoutGpusTheFewestThatHoldTheTenantsAndAnyNameOfTheModel) {
  const std::string tenants = SourceDir() + "/examples/plan/tenants.yaml";
  const ProcessResult text = Plan({"--model", "h200", tenants});
  ASSERT_EQ(text.exit_code, 0) << Describe(text);
  EXPECT_THAT(text.out, HasSubstr("Plan: 7 tenants on 3 GPUs: the fewest that hold them"));
  for (const std::string name : {"H200", "h200", "NVIDIA H200", "nvidia-h200"}) {
    const ProcessResult r = Plan({"--model", name, "--json", tenants});
    ASSERT_EQ(r.exit_code, 0) << name << ": " << Describe(r);
    const Json plan = Json::parse(r.out);
    EXPECT_EQ(plan["gpus"].size(), 3u) << name;
    EXPECT_EQ(plan["fewest_gpus"], true);
    EXPECT_EQ(plan["gpus"][0]["model"], "H200") << name;
  }
  for (const std::string name : {"H100-80GB", "h100-80", "H100", "h100"}) {
    const ProcessResult r = Plan({"--model", name, "--json", tenants});
    ASSERT_EQ(r.exit_code, 0) << name << ": " << Describe(r);
    EXPECT_EQ(Json::parse(r.out)["gpus"][0]["model"], "H100-80GB") << name;
  }
  // Given a count, that count (the spare one said unused); too few, refused with what they need.
  const Json four = Json::parse(Plan({"--model", "h200", "--gpus", "4", "--json", tenants}).out);
  EXPECT_EQ(four["fewest_gpus"], false);
  EXPECT_EQ(four["unused_gpus"].size(), 1u);
  const ProcessResult two = Plan({"--model", "h200", "--gpus", "2", tenants});
  EXPECT_EQ(two.exit_code, 3) << Describe(two);
  EXPECT_THAT(two.err, HasSubstr("they need 3 GPUs"));
}

// Each example's header shows the command that plans it: run from the source tree, as written,
// it plans every tenant (tenants.yaml's said --gpus 2, and it needs 3: exit 3).
TEST_F(GpuslicectlPlanTest, EveryExamplesHeaderCommandPlansIt) {
  for (const char* name : {"tenants.yaml", "fifty-tenants.yaml"}) {
    SCOPED_TRACE(name);
    std::ifstream in(SourceDir() + "/examples/plan/" + name);
    std::string command;
    for (std::string line; std::getline(in, line);) {
      if (const size_t at = line.find("build/bin/gpuslicectl plan ");
          line.starts_with("#") && at != std::string::npos) {
        command = line.substr(at + std::string("build/bin/gpuslicectl plan ").size());
        break;
      }
    }
    ASSERT_FALSE(command.empty()) << "no command in the header of " << name;
    std::vector<std::string> args;
    std::istringstream words(command);
    for (std::string word; words >> word;)
      args.push_back(word.starts_with("examples/") ? SourceDir() + "/" + word : word);
    const ProcessResult r = Plan(args);
    EXPECT_EQ(r.exit_code, 0) << command << "\n" << Describe(r);
  }
}

// A tenants file that cannot be opened says why (the system's reason), not only that it cannot.
TEST_F(GpuslicectlPlanTest, AnUnreadableTenantsFileSaysWhy) {
  ProcessResult r = Plan({"--model", "h200", state_dir() + "/missing.yaml"});
  EXPECT_NE(r.exit_code, 0) << Describe(r);
  EXPECT_THAT(r.err, HasSubstr(state_dir() + "/missing.yaml: cannot be read: No such file or directory"));
  r = Plan({"--model", "h200", state_dir()});
  EXPECT_NE(r.exit_code, 0) << Describe(r);
  EXPECT_THAT(r.err, HasSubstr(state_dir() + ": cannot be read: Is a directory"));
}

}  // namespace
}  // namespace gpuslice::testing
