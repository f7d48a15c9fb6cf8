// The simulator's work model (sim/work_model.h, docs/simulator.md): a spin_ns kernel runs as
// many waves of its spin time as its grid needs on the SMs it has; other kernels ignore the grid.
#include <cuda.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "gpuslice/sim_query.h"
#include "sim/work_model.h"
#include "tests/support/sim_driver_helpers.h"
#include "tests/support/test_env.h"

namespace gpuslice::testing {
namespace {

using sim::KernelWaves;
using sim::ResidentBlocksPerSm;

TEST(WorkModelTest, ResidentBlocksAreLimitedByBlocksAndThreadsPerSm) {
  EXPECT_EQ(ResidentBlocksPerSm(1), 32u);
  EXPECT_EQ(ResidentBlocksPerSm(64), 32u);
  EXPECT_EQ(ResidentBlocksPerSm(128), 16u);
  EXPECT_EQ(ResidentBlocksPerSm(256), 8u);
  EXPECT_EQ(ResidentBlocksPerSm(1000), 2u);
  EXPECT_EQ(ResidentBlocksPerSm(1024), 2u);
  EXPECT_EQ(ResidentBlocksPerSm(0), 32u);
}

TEST(WorkModelTest, WavesAreTheCeilingOfBlocksOverResidentSlots) {
  EXPECT_EQ(KernelWaves(1, 1, 132), 1u);  // narrow: one wave anywhere
  EXPECT_EQ(KernelWaves(1, 1, 1), 1u);
  EXPECT_EQ(KernelWaves(132 * 32, 1, 132), 1u);  // wide: fills the device in one wave
  EXPECT_EQ(KernelWaves(132 * 32 + 1, 1, 132), 2u);
  EXPECT_EQ(KernelWaves(132 * 32, 1, 66), 2u);  // on half the SMs: twice as long
  EXPECT_EQ(KernelWaves(132 * 32, 1, 60), 3u);  // 4224 / 1920
  EXPECT_EQ(KernelWaves(10, 1024, 1), 5u);      // two 1024-thread blocks per SM
  EXPECT_EQ(KernelWaves(1000, 1, 0), 1u);       // no SMs to count: left as one wave
}

class SimWorkModelTest : public SimTest {
 protected:
  void SetUp() override {
    SimTest::SetUp();
    SetEnv("GPUSLICE_SIM_SM_COUNT", "4");
  }
  uint64_t BusyNs() {
    simquery::Snapshot snap;
    std::string error;
    EXPECT_TRUE(simquery::TakeSnapshot(state_path(), &snap, &error)) << error;
    for (const auto& p : snap.devices[0].processes)
      if (p.pid == getpid()) return p.busy_ns;
    return 0;
  }
};

CUresult LaunchGrid(CUfunction f, unsigned blocks, unsigned threads, uint64_t ns) {
  void* params[] = {&ns};
  return cuLaunchKernel(f, blocks, 1, 1, threads, 1, 1, 0, nullptr, params, nullptr);
}

TEST_F(SimWorkModelTest, DeviceReportsResidentBlocksPerSm) {
  InitAndLoadSpin();
  int sms = 0, per_sm = 0;
  ASSERT_CU(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0));
  ASSERT_CU(cuDeviceGetAttribute(&per_sm, CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR, 0));
  EXPECT_EQ(sms, 4);
  EXPECT_EQ(per_sm, 32);
}

// Waves are whole, so each bound below is the next whole wave: a loaded machine may stretch a
// kernel, but not by a whole wave of 20 ms.
TEST_F(SimWorkModelTest, SpinKernelTakesOneWavePerDeviceFull) {
  CUfunction spin = InitAndLoadSpin();
  const uint64_t wave = 20'000'000;
  ASSERT_CU(LaunchGrid(spin, 4 * 32, 1, wave));  // wide: one wave
  ASSERT_CU(cuCtxSynchronize());
  const uint64_t one = BusyNs();
  EXPECT_GE(one, wave);
  EXPECT_LT(one, 2 * wave);
  ASSERT_CU(LaunchGrid(spin, 3 * 4 * 32, 1, wave));  // three device-fulls: three waves
  ASSERT_CU(cuCtxSynchronize());
  const uint64_t three = BusyNs() - one;
  EXPECT_GE(three, 3 * wave);
  EXPECT_LT(three, 4 * wave);
  ASSERT_CU(LaunchGrid(spin, 4 * 2 + 1, 1024, wave));  // 1024-thread blocks: 2 per SM, 9 blocks
  ASSERT_CU(cuCtxSynchronize());
  const uint64_t big_blocks = BusyNs() - one - three;
  EXPECT_GE(big_blocks, 2 * wave);
  EXPECT_LT(big_blocks, 3 * wave);
}

TEST_F(SimWorkModelTest, KernelsOtherThanSpinIgnoreTheirGrid) {
  SetEnv("GPUSLICE_SIM_KERNEL_NS", "20000000");
  InitAndLoadSpin();
  CUmodule module;
  CUfunction noop;
  ASSERT_CU(cuModuleLoadData(&module, kTestPtx));
  ASSERT_CU(cuModuleGetFunction(&noop, module, "noop"));
  ASSERT_CU(cuLaunchKernel(noop, 100000, 1, 1, 256, 1, 1, 0, nullptr, nullptr, nullptr));
  ASSERT_CU(cuCtxSynchronize());
  EXPECT_LT(BusyNs(), 30'000'000u);
}

}  // namespace
}  // namespace gpuslice::testing
