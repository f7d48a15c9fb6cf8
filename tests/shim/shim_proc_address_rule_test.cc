// Drivers that answer cuGetProcAddress with internal entry points — functions that are not their
// exports — must not slip past gpuslice. The simulated driver does so with
// GPUSLICE_SIM_PROC_ADDRESS=internal (docs/simulator.md); then the shim cannot recognise an
// answer by comparing it with the driver's exports, and finds its hook by the version rule
// instead (shim/real_driver.cc, docs/interposition.md). Were that fallback gone, every pointer
// below would be the driver's own and the program would allocate and launch unlimited: the
// controls show that the internal answers are not the exports and that, without the shim, the
// same programs get everything.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "tests/support/sched_fixture.h"
#include "tests/support/shim_fixture.h"

namespace gpuslice::testing {
namespace {

const std::string kInternal = "GPUSLICE_SIM_PROC_ADDRESS=internal";
const std::vector<std::string> kSixChunks = {"--chunk", "256Mi", "--count", "6"};

Json HooksReport(const ProcessResult& r) { return EventOf(r.out, "proc_hooks"); }

class ShimProcAddressRuleTest : public ShimTest {
 protected:
  // The lookups the simulated driver itself answers "not found" (what it does not implement:
  // graphs), asked without the shim.
  Json AbsentFromTheDriver() {
    const ProcessResult r = gpuslice::testing::Run({App("proc-hooks")}, {"LD_LIBRARY_PATH=" + SimLibDir()});
    return HooksReport(r)["absent"];
  }
};

TEST_F(ShimProcAddressRuleTest, EveryHookIsFoundByTheVersionRuleWhenTheDriverAnswersWithInternalEntryPoints) {
  const ProcessResult r = RunShimmed({App("proc-hooks")}, {kInternal});
  EXPECT_EQ(r.exit_code, 0) << Describe(r);
  const Json report = HooksReport(r);
  EXPECT_GE(report.value("checked", 0), report.value("hooks", 1)) << "every hook must be asked for at least once";
  EXPECT_EQ(report["absent"], AbsentFromTheDriver()) << "the shim must not invent what the driver lacks: " << r.out;
  EXPECT_EQ(report.value("into_shim", -1), report.value("checked", 0) - static_cast<int>(report["absent"].size()))
      << r.out;
  EXPECT_TRUE(report["missed"].empty()) << r.out;
}

TEST_F(ShimProcAddressRuleTest, WithoutTheShimTheInternalAnswersAreNotTheExports) {
  // The control: in this mode not one answer is the driver's export of the name asked for, so
  // matching by address finds nothing and only the version rule can find the hooks above.
  const ProcessResult r = gpuslice::testing::Run({App("proc-hooks")}, {"LD_LIBRARY_PATH=" + SimLibDir(), kInternal});
  EXPECT_EQ(r.exit_code, 1) << Describe(r);
  const Json report = HooksReport(r);
  EXPECT_GT(report.value("checked", 0), 0) << r.out;
  EXPECT_EQ(report.value("into_shim", -1), 0) << r.out;
  EXPECT_EQ(report.value("exports", -1), 0) << "internal answers must not be the exported functions: " << r.out;
  EXPECT_EQ(report["missed"].size() + report["absent"].size(), report.value("checked", 0u)) << r.out;
}

TEST_F(ShimProcAddressRuleTest, WithExportsEveryHookIsFoundByAddress) {
  const ProcessResult plain = gpuslice::testing::Run({App("proc-hooks")}, {"LD_LIBRARY_PATH=" + SimLibDir()});
  const Json driver = HooksReport(plain);
  EXPECT_EQ(driver.value("exports", -1), driver.value("checked", 0) - static_cast<int>(driver["absent"].size()))
      << plain.out;
  const ProcessResult r = RunShimmed({App("proc-hooks")});
  EXPECT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_TRUE(HooksReport(r)["missed"].empty()) << r.out;
}

// The quota, for programs that take every entry point from cuGetProcAddress (as libcudart does).
struct RuleCase {
  DriverPath path;
  std::string api;
};

std::ostream& operator<<(std::ostream& os, const RuleCase& c) { return os << c.path.name << "_" << c.api; }

class ShimProcAddressRuleQuotaTest : public ShimTest, public ::testing::WithParamInterface<RuleCase> {};

TEST_P(ShimProcAddressRuleQuotaTest, QuotaAdmitsExactlyWhatFitsWhenTheDriverAnswersWithInternalEntryPoints) {
  const ProcessResult r =
      RunShimmed(GetParam().path.Command(GetParam().api, kSixChunks), {"GPUSLICE_MEMORY_LIMIT=1Gi", kInternal});
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  const Json result = ResultOf(r);
  EXPECT_EQ(result.value("allocated", -1), 4) << r.out;
  EXPECT_EQ(result.value("refused", -1), 2) << r.out;
  EXPECT_EQ(result["refusals"].value("CUDA_ERROR_OUT_OF_MEMORY", 0), 2) << r.out;
  EXPECT_EQ(result.value("bytes_obtained", uint64_t{0}), kGi) << r.out;
}

TEST_P(ShimProcAddressRuleQuotaTest, WithoutTheShimTheSameProgramGetsEverything) {
  const ProcessResult r =
      gpuslice::testing::Run(GetParam().path.Command(GetParam().api, kSixChunks),
                             {"LD_LIBRARY_PATH=" + SimLibDir(), "GPUSLICE_MEMORY_LIMIT=1Gi", kInternal});
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_EQ(ResultOf(r).value("allocated", -1), 6) << r.out;
}

INSTANTIATE_TEST_SUITE_P(ProcAddressPrograms, ShimProcAddressRuleQuotaTest,
                         ::testing::Values(RuleCase{kProcAddress, "alloc"}, RuleCase{kProcAddress, "vmm"},
                                           RuleCase{kProcAddressPtsz, "async"}, RuleCase{kProcAddressPtsz, "pool"},
                                           RuleCase{kWorkload, "alloc"}, RuleCase{kWorkload, "async"}),
                         [](const auto& info) { return info.param.path.name + "_" + info.param.api; });

// Launches: gpuslice-workload takes cuLaunchKernel from cuGetProcAddress. A compute limit of 30%
// holds it near 30% of the device even alone (docs/scheduling.md); were its launches not gated,
// it would have the whole device, as the unmanaged control does.
class ShimProcAddressRuleLaunchTest : public SchedTest {
 protected:
  // The harness gives a workload only the GPUSLICE_* variables it is told: the mode goes here.
  static StartOptions Internal(StartOptions options) {
    options.env.push_back(kInternal);
    return options;
  }
};

TEST_F(ShimProcAddressRuleLaunchTest, ComputeLimitHoldsWhenTheDriverAnswersWithInternalEntryPoints) {
  ASSERT_NE(Start("capped", kComputeBound, Internal(Managed(25, 30))), nullptr);
  SleepFor(0.5);
  const auto [a, b] = Measure(2);
  const double busy = BusyFraction(a, b, "capped");
  std::printf("capped at 30%%, internal entry points: busy %.3f of the device\n", busy);
  // Measured 0.25 (limit 30%); with the version rule removed, launches are not gated: 0.97.
  // The bound leaves room for a loaded machine.
  EXPECT_LE(busy, 0.5);
}

TEST_F(ShimProcAddressRuleLaunchTest, WithoutTheShimTheSameWorkloadHasTheWholeDevice) {
  ASSERT_NE(Start("unmanaged", kComputeBound, Internal(Unmanaged())), nullptr);
  SleepFor(0.5);
  const auto [a, b] = Measure(2);
  const double busy = BusyFraction(a, b, "unmanaged");
  std::printf("unmanaged, internal entry points: busy %.3f of the device\n", busy);
  EXPECT_GE(busy, 0.7);
}

}  // namespace
}  // namespace gpuslice::testing
