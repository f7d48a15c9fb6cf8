// What a program under a quota reads about memory is its slice, so that frameworks sizing their
// caches from it (PyTorch, TensorFlow, vLLM's gpu_memory_utilization) stay inside it:
// cuMemGetInfo_v2 says total = the quota and free = the quota less what the whole tenant holds,
// never more than the device really has free; cuDeviceTotalMem_v2 says the quota; NVML's
// nvmlDeviceGetMemoryInfo(_v2), as nvidia-smi and pynvml read it, agrees. Also how the limit is
// written: a percentage of the device, and a per-ordinal limit overriding the global one.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/support/shim_fixture.h"

namespace gpuslice::testing {
namespace {

class ShimMemoryInfoTest : public ShimTest {
 protected:
  static uint64_t Free(const Json& mem) { return mem.value("free", uint64_t{0}); }
  static uint64_t Total(const Json& mem) { return mem.value("total", uint64_t{0}); }
};

TEST_F(ShimMemoryInfoTest, MemGetInfoReportsTheQuotaAsTotalAndWhatIsLeftAsFree) {
  const ProcessResult r =
      RunShimmed({App("direct"), "alloc", "--chunk", "256Mi", "--count", "3"}, {"GPUSLICE_MEMORY_LIMIT=1Gi"});
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  const Json result = ResultOf(r);
  EXPECT_EQ(Total(result["mem_before"]), kGi) << r.out;
  EXPECT_EQ(Free(result["mem_before"]), kGi) << r.out;
  EXPECT_EQ(Total(result["mem_held"]), kGi) << r.out;
  EXPECT_EQ(Free(result["mem_held"]), 256 * kMi) << r.out;
  EXPECT_EQ(result.value("total_mem", uint64_t{0}), kGi) << "cuDeviceTotalMem_v2 must report the quota: " << r.out;
}

TEST_F(ShimMemoryInfoTest, FreeIsWhatTheWholeTenantLeaves) {
  const std::vector<std::string> team = {"GPUSLICE_TENANT=team", "GPUSLICE_MEMORY_LIMIT=1Gi"};
  auto holder = StartHolder({App("direct"), "alloc", "--chunk", "256Mi", "--count", "1"}, team);
  const ProcessResult r = RunShimmed({App("dlsym"), "alloc", "--chunk", "256Mi", "--count", "3"}, team);
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  const Json result = ResultOf(r);
  EXPECT_EQ(Total(result["mem_before"]), kGi) << r.out;
  EXPECT_EQ(Free(result["mem_before"]), 768 * kMi) << "another process of the tenant holds 256 MiB: " << r.out;
  EXPECT_EQ(Free(result["mem_held"]), 0u) << r.out;
  EXPECT_EQ(result.value("allocated", -1), 3) << r.out;
  EXPECT_EQ(Stop(*holder).exit_code, 0);
}

TEST_F(ShimMemoryInfoTest, TotalIsNeverMoreThanTheDevice) {
  SetEnv("GPUSLICE_SIM_MEMORY", "2Gi");
  const ProcessResult r =
      RunShimmed({App("direct"), "alloc", "--chunk", "256Mi", "--count", "1"}, {"GPUSLICE_MEMORY_LIMIT=4Gi"});
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  const Json result = ResultOf(r);
  EXPECT_EQ(Total(result["mem_before"]), 2 * kGi) << r.out;
  EXPECT_EQ(Free(result["mem_before"]), 2 * kGi) << r.out;
  EXPECT_EQ(result.value("total_mem", uint64_t{0}), 2 * kGi) << r.out;
}

TEST_F(ShimMemoryInfoTest, FreeIsNeverMoreThanWhatIsPhysicallyFree) {
  SetEnv("GPUSLICE_SIM_MEMORY", "2Gi");
  // A process outside gpuslice holds 1.5 GiB of the 2 GiB device.
  Subprocess outsider({App("direct"), "alloc", "--chunk", "512Mi", "--count", "3", "--hold", "60"},
                      {"LD_LIBRARY_PATH=" + SimLibDir()});
  ASSERT_TRUE(outsider.WaitForOutput("\"event\":\"holding\"")) << outsider.StdoutSoFar();
  const ProcessResult r =
      RunShimmed({App("direct"), "alloc", "--chunk", "256Mi", "--count", "4"}, {"GPUSLICE_MEMORY_LIMIT=1Gi"});
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  const Json result = ResultOf(r);
  EXPECT_EQ(Total(result["mem_before"]), kGi) << r.out;
  EXPECT_EQ(Free(result["mem_before"]), 512 * kMi) << "only 512 MiB of the device is free: " << r.out;
  EXPECT_EQ(result.value("allocated", -1), 2) << r.out;
  EXPECT_EQ(result["refusals"].value("CUDA_ERROR_OUT_OF_MEMORY", 0), 2) << r.out;
  EXPECT_EQ(Stop(outsider).exit_code, 0);
}

TEST_F(ShimMemoryInfoTest, PercentageLimitIsAShareOfTheDevice) {
  SetEnv("GPUSLICE_SIM_MEMORY", "4Gi");
  const ProcessResult r =
      RunShimmed({App("direct"), "alloc", "--chunk", "256Mi", "--count", "6"}, {"GPUSLICE_MEMORY_LIMIT=25%"});
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  const Json result = ResultOf(r);
  EXPECT_EQ(Total(result["mem_before"]), kGi) << r.out;
  EXPECT_EQ(result.value("total_mem", uint64_t{0}), kGi) << r.out;
  EXPECT_EQ(result.value("allocated", -1), 4) << r.out;
  EXPECT_EQ(result.value("refused", -1), 2) << r.out;
}

TEST_F(ShimMemoryInfoTest, PerDeviceLimitOverridesTheGlobalLimit) {
  const ProcessResult r = RunShimmed({App("direct"), "alloc", "--chunk", "256Mi", "--count", "6"},
                                     {"GPUSLICE_MEMORY_LIMIT=4Gi", "GPUSLICE_MEMORY_LIMIT_0=512Mi"});
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  const Json result = ResultOf(r);
  EXPECT_EQ(Total(result["mem_before"]), 512 * kMi) << r.out;
  EXPECT_EQ(result.value("total_mem", uint64_t{0}), 512 * kMi) << r.out;
  EXPECT_EQ(result.value("allocated", -1), 2) << r.out;
}

TEST_F(ShimMemoryInfoTest, PerDeviceLimitAppliesOnlyToItsOwnDevice) {
  SetEnv("GPUSLICE_SIM_DEVICES", "2");
  const std::vector<std::string> limits = {"GPUSLICE_MEMORY_LIMIT=1Gi", "GPUSLICE_MEMORY_LIMIT_1=512Mi"};
  const ProcessResult on0 =
      RunShimmed({App("direct"), "alloc", "--chunk", "256Mi", "--count", "6", "--device", "0"}, limits);
  const ProcessResult on1 =
      RunShimmed({App("direct"), "alloc", "--chunk", "256Mi", "--count", "6", "--device", "1"}, limits);
  ASSERT_EQ(on0.exit_code, 0) << Describe(on0);
  ASSERT_EQ(on1.exit_code, 0) << Describe(on1);
  EXPECT_EQ(Total(ResultOf(on0)["mem_before"]), kGi) << on0.out;
  EXPECT_EQ(ResultOf(on0).value("allocated", -1), 4) << on0.out;
  EXPECT_EQ(Total(ResultOf(on1)["mem_before"]), 512 * kMi) << on1.out;
  EXPECT_EQ(ResultOf(on1).value("total_mem", uint64_t{0}), 512 * kMi) << on1.out;
  EXPECT_EQ(ResultOf(on1).value("allocated", -1), 2) << on1.out;
}

// nvidia-smi and pynvml never create a context: they see the slice through NVML alone.
TEST_F(ShimMemoryInfoTest, NvmlShowsTheQuotaAndWhatTheTenantHolds) {
  const std::vector<std::string> team = {"GPUSLICE_TENANT=team", "GPUSLICE_MEMORY_LIMIT=1Gi"};
  auto holder = StartHolder({App("direct"), "alloc", "--chunk", "256Mi", "--count", "2"}, team);
  const ProcessResult r = RunShimmed({App("dlsym"), "nvml"}, team);
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  const Json nvml = EventOf(r.out, "nvml");
  EXPECT_EQ(nvml.value("info_from", ""), "libgpuslice.so") << r.out;
  for (const char* version : {"v1", "v2"}) {
    SCOPED_TRACE(version);
    const Json& info = nvml[version];
    EXPECT_EQ(info.value("rc", -1), 0) << r.out;
    EXPECT_EQ(info.value("total", uint64_t{0}), kGi) << r.out;
    EXPECT_EQ(info.value("used", uint64_t{0}), 512 * kMi) << r.out;
    EXPECT_EQ(info.value("free", uint64_t{0}), 512 * kMi) << r.out;
  }
  EXPECT_EQ(nvml["v2"].value("reserved", uint64_t{1}), 0u) << r.out;
  EXPECT_EQ(Stop(*holder).exit_code, 0);
}

TEST_F(ShimMemoryInfoTest, NvmlOfAnotherTenantDoesNotCountTheFirstTenantsMemory) {
  auto holder = StartHolder({App("direct"), "alloc", "--chunk", "256Mi", "--count", "2"},
                            {"GPUSLICE_TENANT=team", "GPUSLICE_MEMORY_LIMIT=1Gi"});
  const ProcessResult r = RunShimmed({App("dlsym"), "nvml"}, {"GPUSLICE_TENANT=other", "GPUSLICE_MEMORY_LIMIT=1Gi"});
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  const Json nvml = EventOf(r.out, "nvml");
  EXPECT_EQ(nvml["v2"].value("total", uint64_t{0}), kGi) << r.out;
  EXPECT_EQ(nvml["v2"].value("used", uint64_t{1}), 0u) << r.out;
  EXPECT_EQ(nvml["v2"].value("free", uint64_t{0}), kGi) << r.out;
  EXPECT_EQ(Stop(*holder).exit_code, 0);
}

// A per-device limit and NVML: NVML alone cannot tell which CUDA ordinal a GPU is, so before any
// CUDA process of the tenant has opened the GPU it reports the device as the driver does — and
// never sets a quota the CUDA program would then contradict. Once the program runs, NVML shows
// its slice (docs/accounting.md).
TEST_F(ShimMemoryInfoTest, NvmlAgreesWithAPerDeviceLimitOnceTheTenantUsesTheGpu) {
  SetEnv("GPUSLICE_SIM_MEMORY", "4Gi");
  const std::vector<std::string> team = {"GPUSLICE_TENANT=team", "GPUSLICE_MEMORY_LIMIT=4Gi",
                                         "GPUSLICE_MEMORY_LIMIT_0=512Mi"};
  const ProcessResult first = RunShimmed({App("dlsym"), "nvml"}, team);
  ASSERT_EQ(first.exit_code, 0) << Describe(first);
  EXPECT_EQ(EventOf(first.out, "nvml")["v2"].value("total", uint64_t{0}), 4 * kGi) << first.out;
  // The CUDA program started after it still gets its 512 MiB quota.
  auto holder = StartHolder({App("direct"), "alloc", "--chunk", "256Mi", "--count", "1"}, team);
  EXPECT_EQ(EventOf(holder->StdoutSoFar(), "holding").value("allocated", -1), 1);
  const ProcessResult r = RunShimmed({App("dlsym"), "nvml"}, team);
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_EQ(EventOf(r.out, "nvml")["v2"].value("total", uint64_t{0}), 512 * kMi) << r.out;
  EXPECT_EQ(EventOf(r.out, "nvml")["v2"].value("used", uint64_t{0}), 256 * kMi) << r.out;
  EXPECT_EQ(Stop(*holder).exit_code, 0);
}

TEST_F(ShimMemoryInfoTest, NvmlWithoutALimitShowsTheDeviceAsItIs) {
  SetEnv("GPUSLICE_SIM_MEMORY", "4Gi");
  const ProcessResult shimmed = RunShimmed({App("dlsym"), "nvml"});
  const ProcessResult plain = gpuslice::testing::Run({App("dlsym"), "nvml"}, {"LD_LIBRARY_PATH=" + SimLibDir()});
  ASSERT_EQ(shimmed.exit_code, 0) << Describe(shimmed);
  ASSERT_EQ(plain.exit_code, 0) << Describe(plain);
  EXPECT_EQ(EventOf(shimmed.out, "nvml")["v1"], EventOf(plain.out, "nvml")["v1"]);
  EXPECT_EQ(EventOf(shimmed.out, "nvml")["v2"], EventOf(plain.out, "nvml")["v2"]);
  EXPECT_EQ(EventOf(plain.out, "nvml")["v1"].value("total", uint64_t{0}), 4 * kGi);
}

}  // namespace
}  // namespace gpuslice::testing
