// The examples on a real NVIDIA GPU (CTest label `gpu`; each case reports itself skipped
// without one; scripts/gpu-check.sh runs them). The same sample binary as on the simulated GPU,
// with nothing on LD_LIBRARY_PATH, so the dynamic loader finds the installed driver: there the
// kernel really runs and every sum is checked against the host's.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/support/shim_fixture.h"
#include "tests/support/subprocess.h"
#include "tests/support/test_env.h"

namespace gpuslice::testing {
namespace {

using ::testing::HasSubstr;

const std::vector<std::string> kRealDriverEnv = {"LD_LIBRARY_PATH="};

std::string Sample() { return BinDir() + "/vector_add_driver"; }

class GpuExamplesTest : public ShimTest {
 protected:
  void SetUp() override {
    ShimTest::SetUp();
    const ProcessResult probe =
        gpuslice::testing::Run({BinDir() + "/gpuslice-workload", "compute", "--kernels", "1", "--kernel-us", "10"},
                               kRealDriverEnv);
    if (probe.exit_code != 0) GTEST_SKIP() << "no usable NVIDIA driver/GPU: " << probe.err;
  }
};

TEST_F(GpuExamplesTest, SampleComputesEverySumOnTheGpu) {
  const ProcessResult r = gpuslice::testing::Run({Sample()}, kRealDriverEnv);
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_THAT(r.out, HasSubstr("copies: a and b round-tripped host -> device -> host intact"));
  EXPECT_THAT(r.out, HasSubstr("result: all 1048576 sums equal a + b computed on the host"));
}

TEST_F(GpuExamplesTest, SampleUnderTheEntrypointWrapperSeesItsQuota) {
  const ProcessResult r = gpuslice::testing::Run({"/bin/sh", SourceDir() + "/examples/container/gpuslice-entrypoint.sh",
                                                  "--library", ShimPath(), Sample()},
                                                 {"LD_LIBRARY_PATH=", "GPUSLICE_STATE_DIR=" + state_dir(),
                                                  "GPUSLICE_TENANT=gpu-sample", "GPUSLICE_MEMORY_LIMIT=1Gi"});
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_THAT(r.out, HasSubstr("cuDeviceTotalMem 1073741824 B (1.00 GiB)"));
  EXPECT_THAT(r.out, HasSubstr(", total 1073741824 B (1.00 GiB)"));
  EXPECT_THAT(r.out, HasSubstr("result: all 1048576 sums equal a + b computed on the host"));
}

TEST_F(GpuExamplesTest, SampleUnderTheEntrypointWrapperIsRefusedPastItsQuota) {
  const ProcessResult r = gpuslice::testing::Run({"/bin/sh", SourceDir() + "/examples/container/gpuslice-entrypoint.sh",
                                                  "--library", ShimPath(), Sample()},
                                                 {"LD_LIBRARY_PATH=", "GPUSLICE_STATE_DIR=" + state_dir(),
                                                  "GPUSLICE_TENANT=gpu-sample", "GPUSLICE_MEMORY_LIMIT=8Mi"});
  EXPECT_EQ(r.exit_code, 3) << Describe(r);
  EXPECT_THAT(r.err, HasSubstr("cuMemAlloc(c) failed: CUDA_ERROR_OUT_OF_MEMORY"));
}

}  // namespace
}  // namespace gpuslice::testing
