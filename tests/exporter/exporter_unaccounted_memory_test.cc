// Unaccounted memory (broker/unaccounted.h): two tenants of one name whose state directories
// differ (a container's mount of GPUSLICE_STATE_DIR forgotten) on one simulated GPU. Each state
// directory counts only its own processes against the quota, so the GPU fills up under it: the
// second tenant's stderr, `gpuslicectl status` and the exporter each report the memory the
// device holds beyond what the directory accounts for. The controls share one directory and
// report none.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "tests/support/exporter_fixture.h"
#include "tests/support/shim_fixture.h"

namespace gpuslice::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class UnaccountedMemoryTest : public ShimTest {
 protected:
  void SetUp() override {
    ShimTest::SetUp();
    SetEnv("GPUSLICE_SIM_MEMORY", "6Gi");
    char pattern[] = "/tmp/gpuslice-other-state-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    other_dir_ = pattern;
  }
  void TearDown() override {
    std::error_code ignored;
    std::filesystem::remove_all(other_dir_, ignored);
    ShimTest::TearDown();
  }

  // A process of `tenant` (quota 4 GiB) in `dir` holding `gib` chunks of 1 GiB.
  std::unique_ptr<Subprocess> Hold(const std::string& tenant, const std::string& dir, int gib) {
    return StartHolder(kWorkload.Command("alloc", {"--chunk", "1Gi", "--count", std::to_string(gib)}),
                       {"GPUSLICE_STATE_DIR=" + dir, "GPUSLICE_TENANT=" + tenant, "GPUSLICE_MEMORY_LIMIT=4Gi"});
  }

  ProcessResult Status(const std::string& dir, bool json = false) {
    std::vector<std::string> argv = {BinDir() + "/gpuslicectl", "status", "--state-dir", dir};
    if (json) argv.push_back("--json");
    return gpuslice::testing::Run(argv, {"LD_LIBRARY_PATH=" + SimLibDir()});
  }

  std::string Metrics(const std::string& dir) {
    Exporter exporter(dir, state_path());
    EXPECT_TRUE(exporter.WaitServing()) << exporter.process().StderrSoFar();
    return exporter.Metrics().value_or("");
  }

  std::string other_dir_;
};

constexpr char kWarning[] = "gpuslice: warning: GPU-";

TEST_F(UnaccountedMemoryTest, TwoStateDirectoriesOnOneGpuEachReportTheOthersMemory) {
  auto first = Hold("team-a", state_dir(), 3);
  // The second process of team-a, in another directory: its quota (4 GiB, none used there) is
  // more than the 3 GiB the device has free, and the 3 GiB in use are accounted nowhere here.
  auto second = Hold("team-a", other_dir_, 2);
  const std::string err = second->StderrSoFar();
  EXPECT_THAT(err,
              HasSubstr(" has 3 GiB free, less than the 4 GiB tenant team-a may still take: 3 GiB of its 6 GiB "
                        "is in use and 0 bytes of that is accounted in " +
                        other_dir_ +
                        "; the other 3 GiB is held by processes of another state directory or not under gpuslice"));
  EXPECT_EQ(GpusliceLines(err).size(), 1u) << err;

  // Each directory's status: what it holds, and the other's memory as unaccounted.
  ProcessResult r = Status(other_dir_);
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_THAT(r.out, HasSubstr("  device: GPU 0, NVIDIA H100 80GB HBM3 (simulated); 5 GiB in use, 1 GiB free"));
  EXPECT_THAT(r.out,
              HasSubstr("  accounted here: 2 GiB of the 5 GiB in use; unaccounted: 3 GiB -- UNACCOUNTED: held by "
                        "another state directory's tenants or by processes not under gpuslice"));
  // Every process on the device, named, whichever directory it is in: where to look next.
  EXPECT_THAT(r.out, HasSubstr("  device processes: " + std::to_string(first->pid()) + " gpuslice-workload (3 GiB), " +
                               std::to_string(second->pid()) + " gpuslice-workload (2 GiB)\n"));
  r = Status(state_dir());
  EXPECT_THAT(r.out, HasSubstr("  accounted here: 3 GiB of the 5 GiB in use; unaccounted: 2 GiB -- UNACCOUNTED"));
  r = Status(other_dir_, /*json=*/true);
  const Json gpu = Json::parse(r.out)["gpus"][0];
  EXPECT_EQ(gpu["accounted_bytes"], 2 * kGi);
  EXPECT_EQ(gpu["unaccounted_bytes"], 3 * kGi);
  EXPECT_EQ(gpu["unaccounted_held_elsewhere"], true);
  EXPECT_EQ(gpu["device"]["memory_used_bytes"], 5 * kGi);
  ASSERT_EQ(gpu["device"]["processes"].size(), 2u) << gpu.dump();
  EXPECT_EQ(gpu["device"]["processes"][0]["name"], "gpuslice-workload");

  // The exporter on the second directory: the same figure, as a metric.
  EXPECT_THAT(Metrics(other_dir_), HasSubstr("gpuslice_gpu_memory_unaccounted_bytes{gpu=\"GPU-"));
  EXPECT_THAT(Metrics(other_dir_), HasSubstr("\"} 3221225472\n"));
  Stop(*second);
  Stop(*first);
}

// Control: the same two processes in one shared directory. Everything in use is accounted.
TEST_F(UnaccountedMemoryTest, OneSharedStateDirectoryReportsNone) {
  auto first = Hold("team-a", state_dir(), 3);
  auto second = Hold("team-a", state_dir(), 1);
  EXPECT_THAT(second->StderrSoFar(), Not(HasSubstr(kWarning)));
  const ProcessResult r = Status(state_dir());
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_THAT(r.out, HasSubstr("  accounted here: 4 GiB of the 4 GiB in use; unaccounted: none\n"));
  const std::string metrics = Metrics(state_dir());
  EXPECT_THAT(metrics, HasSubstr("gpuslice_gpu_memory_unaccounted_bytes{gpu=\"GPU-"));
  EXPECT_THAT(metrics, HasSubstr("\"} 0\n"));
  EXPECT_THAT(metrics, Not(HasSubstr("\"} 3221225472\n")));
  Stop(*second);
  Stop(*first);
}

// Control for the warning's rule: a device with less free than the tenant may take is not
// warned about when this directory accounts for what is in use (another tenant holds it here).
TEST_F(UnaccountedMemoryTest, AFullDeviceWhoseMemoryIsAccountedHereIsNotWarnedAbout) {
  auto first = Hold("team-b", state_dir(), 3);
  auto second = Hold("team-a", state_dir(), 2);
  EXPECT_THAT(second->StderrSoFar(), Not(HasSubstr(kWarning)));
  Stop(*second);
  Stop(*first);
}

// Control for the allowance: each process's context takes device memory no tenant is charged
// (as on a real GPU). Three processes' 400 MiB contexts are within the 512 MiB per process taken
// for driver-internal memory, and are not reported as another directory's.
TEST_F(UnaccountedMemoryTest, ContextsOfTheProcessesHereAreTakenForDriverMemory) {
  SetEnv("GPUSLICE_SIM_CONTEXT_MEMORY", "400Mi");
  auto first = Hold("team-a", state_dir(), 1);
  auto second = Hold("team-a", state_dir(), 1);
  auto third = Hold("team-a", state_dir(), 1);
  for (auto* p : {first.get(), second.get(), third.get()}) EXPECT_THAT(p->StderrSoFar(), Not(HasSubstr(kWarning)));
  const ProcessResult r = Status(state_dir());
  EXPECT_THAT(r.out, HasSubstr("  accounted here: 3 GiB of the 4.17 GiB in use; unaccounted: 1.17 GiB (within the "
                               "1.5 GiB allowed for the driver-internal memory of 3 processes)\n"));
  Stop(*third);
  Stop(*second);
  Stop(*first);
}

}  // namespace
}  // namespace gpuslice::testing
