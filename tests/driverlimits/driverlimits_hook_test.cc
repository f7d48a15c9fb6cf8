// The driver's memory limits as a hard backstop under the preload (docs/accounting.md, "Three
// levels of enforcement"), end to end on the simulated driver: gpuslice-driver-limits, run as a
// container runtime runs an OCI hook (the container's state on stdin), sets the tenant's limit as
// the hard limit and its request as the soft limit on the container's cgroup; a process of the
// container started WITHOUT the preload is then refused past the limit by the driver itself
// (without the hook it takes the whole GPU); `gpuslicectl status` says "driver-enforced"; the
// poststop hook clears it. Where the driver has no such limits (before r615), or on a MIG
// instance, the hook lets the container start, says why, and status says that the preload
// alone enforces memory — which, on a MIG instance, it still does.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "gpuslice/sim_query.h"
#include "sim/sim_state.h"
#include "tests/support/shim_fixture.h"

namespace gpuslice::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class DriverLimitsHookTest : public ShimTest {
 protected:
  void SetUp() override {
    ShimTest::SetUp();
    SetEnv("GPUSLICE_SIM_MEMORY", "4Gi");
  }

  // The OCI hook as the runtime runs it: the container's state on stdin.
  ProcessResult Hook(const std::vector<std::string>& args, const std::string& container, int pid) {
    const std::string state = "{\"ociVersion\":\"1.0.2\",\"id\":\"" + container +
                              "\",\"status\":\"creating\",\"pid\":" + std::to_string(pid) + ",\"bundle\":\"/tmp\"}";
    std::vector<std::string> argv = {"/bin/sh", "-c", "printf %s \"$OCI_STATE\" | exec \"$@\"", "sh",
                                     BinDir() + "/gpuslice-driver-limits"};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.insert(argv.end(), {"--state-dir", state_dir(), "--nvml-library", SimLibDir() + "/libnvidia-ml.so.1"});
    return gpuslice::testing::Run(argv, {"OCI_STATE=" + state});
  }
  ProcessResult Set(const std::string& gpu, int pid) {
    return Hook({"set", "--tenant", "team", "--gpu", gpu, "--request", std::to_string(512 * kMi), "--limit",
                 std::to_string(kGi)},
                "ctr-1", pid);
  }
  // A process of the container (this test's cgroup) without the preload: 8 chunks of 256 MiB.
  int AllocatedWithoutPreload() {
    const ProcessResult r = gpuslice::testing::Run({App("direct"), "alloc", "--chunk", "256Mi", "--count", "8"},
                                                   {"LD_LIBRARY_PATH=" + SimLibDir()});
    EXPECT_EQ(r.exit_code, 0) << Describe(r);
    return ResultOf(r).value("allocated", -1);
  }
  std::string Status() {
    const ProcessResult r = gpuslice::testing::Run({BinDir() + "/gpuslicectl", "status", "--state-dir", state_dir()},
                                                   {"LD_LIBRARY_PATH=" + SimLibDir()});
    EXPECT_EQ(r.exit_code, 0) << Describe(r);
    return r.out;
  }
  // The first GPU's UUID (`mig`: its first MIG instance's), the simulated devices created as
  // this test's variables say.
  std::string GpuUuid(bool mig = false) {
    std::string error;
    EXPECT_TRUE(sim::SimState::OpenOrCreate(&error)) << error;
    simquery::Snapshot snapshot;
    EXPECT_TRUE(simquery::TakeSnapshot(state_path(), &snapshot, &error)) << error;
    if (snapshot.devices.empty()) return "";
    const simquery::DeviceSnapshot& gpu = snapshot.devices[0];
    if (!mig) return gpu.uuid;
    return gpu.mig_instances.empty() ? "" : gpu.mig_instances[0].uuid;
  }
  // A tenant holding 256 MiB through the preload, so that status has it to show.
  std::unique_ptr<Subprocess> HoldAsTenant(const std::vector<std::string>& extra = {}) {
    std::vector<std::string> env = {"GPUSLICE_TENANT=team", "GPUSLICE_MEMORY_REQUEST=512Mi",
                                    "GPUSLICE_MEMORY_LIMIT=1Gi"};
    env.insert(env.end(), extra.begin(), extra.end());
    return StartHolder({App("direct"), "alloc", "--chunk", "256Mi", "--count", "1"}, env);
  }
};

TEST_F(DriverLimitsHookTest, OnR615AProcessWithoutThePreloadIsRefusedPastTheTenantsLimitByTheDriver) {
  SetEnv("GPUSLICE_SIM_DRIVER_VERSION", "615");
  EXPECT_EQ(AllocatedWithoutPreload(), 8) << "the control: without the hook, the whole GPU";
  Subprocess container({"/bin/sleep", "60"});
  const ProcessResult set = Set(GpuUuid(), container.pid());
  ASSERT_EQ(set.exit_code, 0) << Describe(set);
  EXPECT_EQ(set.err, "") << "nothing to say when the limits are set";
  EXPECT_EQ(AllocatedWithoutPreload(), 4) << "1 GiB: the tenant's limit, held by the driver";
  auto tenant = HoldAsTenant();
  const std::string status = Status();
  EXPECT_THAT(status, HasSubstr("memory: enforced by the preload, and by the driver's per-cgroup hard limits on the "
                                "containers of 1 tenant"));
  EXPECT_THAT(status, HasSubstr("\n    driver-enforced: hard 1 GiB, soft 512 MiB (1 container)\n"));
  EXPECT_EQ(Stop(*tenant).exit_code, 0);
  // The container goes: the poststop hook clears its cgroup's limits and its record.
  const ProcessResult cleared = Hook({"clear"}, "ctr-1", 0);
  ASSERT_EQ(cleared.exit_code, 0) << Describe(cleared);
  EXPECT_EQ(AllocatedWithoutPreload(), 8);
  EXPECT_THAT(Status(), Not(HasSubstr("driver-enforced")));
  EXPECT_TRUE(std::filesystem::is_empty(state_dir() + "/driver-limits"));
}

TEST_F(DriverLimitsHookTest, BeforeR615TheHookLetsTheContainerStartAndStatusSaysPreloadOnly) {
  Subprocess container({"/bin/sleep", "60"});
  const ProcessResult set = Set(GpuUuid(), container.pid());
  EXPECT_EQ(set.exit_code, 0) << "a backstop the driver lacks never stops a container: " << Describe(set);
  EXPECT_THAT(set.err, HasSubstr("has no per-cgroup memory limits (NVIDIA driver r615 or later); tenant 'team' is "
                                 "held to its memory by the preload only"));
  EXPECT_EQ(AllocatedWithoutPreload(), 8);
  auto tenant = HoldAsTenant();
  EXPECT_THAT(Status(), HasSubstr("memory: enforced by the preload only (the driver has no per-cgroup memory limits "
                                  "(NVIDIA driver r615 or later)): a process without the preload is not limited"));
  EXPECT_EQ(Stop(*tenant).exit_code, 0);
}

TEST_F(DriverLimitsHookTest, AMigInstanceKeepsThePreloadsEnforcementAndSaysSo) {
  SetEnv("GPUSLICE_SIM_DRIVER_VERSION", "615");
  SetEnv("GPUSLICE_SIM_MODEL", "H100-80GB");
  SetEnv("GPUSLICE_SIM_MIG", "3g.40gb,3g.40gb");
  const std::string mig = GpuUuid(/*mig=*/true);
  ASSERT_EQ(mig.rfind("MIG-", 0), 0u) << mig;
  Subprocess container({"/bin/sleep", "60"});
  const ProcessResult set = Set(mig, container.pid());
  EXPECT_EQ(set.exit_code, 0) << Describe(set);
  EXPECT_THAT(set.err, HasSubstr(mig + " is a MIG instance, which the driver's memory limits do not cover"));
  // The preload holds the tenant to its limit on the instance: 1 GiB of 4 chunks asked for.
  const ProcessResult r = RunShimmed({App("direct"), "alloc", "--chunk", "512Mi", "--count", "4"},
                                     {"CUDA_VISIBLE_DEVICES=" + mig, "GPUSLICE_TENANT=team",
                                      "GPUSLICE_MEMORY_REQUEST=512Mi", "GPUSLICE_MEMORY_LIMIT=1Gi"});
  EXPECT_EQ(ResultOf(r).value("allocated", -1), 2) << Describe(r);
  auto tenant = HoldAsTenant({"CUDA_VISIBLE_DEVICES=" + mig});
  EXPECT_THAT(Status(), HasSubstr("memory: enforced by the preload within the MIG instance's own memory (the "
                                  "driver's per-cgroup limits do not cover MIG)"));
  EXPECT_EQ(Stop(*tenant).exit_code, 0);
}

}  // namespace
}  // namespace gpuslice::testing
