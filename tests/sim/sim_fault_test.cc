// Fatal GPU faults on the simulated GPU (docs/simulator.md, Faults): a kernel named
// fault_illegal_address breaks its own context for good (CUDA_ERROR_ILLEGAL_ADDRESS, sticky).
// Time-sliced or in another MIG instance, no other process notices; under MPS every client of
// that GPU is told, as Volta and later MPS do.
#include <cuda.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "common/clock.h"
#include "gpuslice/sim_query.h"
#include "tests/support/sim_driver_helpers.h"
#include "tests/support/test_env.h"

namespace gpuslice::testing {
namespace {

constexpr const char* kFaultPtx = R"(
.version 7.0
.target sm_70
.address_size 64
.visible .entry spin_ns(.param .u64 spin_ns_param_0) { ret; }
.visible .entry fault_illegal_address() { ret; }
)";

constexpr int kSawFault = 10;

// Runs 1 ms kernels until `run_ns` has passed; kSawFault when a call reports the fault.
int Bystander(const char* visible, uint64_t run_ns, int fd) {
  if (visible) setenv("CUDA_VISIBLE_DEVICES", visible, 1);
  CUcontext ctx;
  CUmodule module;
  CUfunction spin;
  if (cuInit(0) || cuDevicePrimaryCtxRetain(&ctx, 0) || cuCtxSetCurrent(ctx)) return 1;
  if (cuModuleLoadData(&module, kFaultPtx) || cuModuleGetFunction(&spin, module, "spin_ns")) return 2;
  Signal(fd);
  const uint64_t end = MonotonicNanos() + run_ns;
  while (MonotonicNanos() < end) {
    const CUresult launched = LaunchSpin(spin, 1'000'000);
    const CUresult synced = cuCtxSynchronize();
    if (launched == CUDA_ERROR_ILLEGAL_ADDRESS || synced == CUDA_ERROR_ILLEGAL_ADDRESS) return kSawFault;
    if (launched != CUDA_SUCCESS || synced != CUDA_SUCCESS) return 3;
  }
  return 0;
}

// Launches the faulting kernel; 0 when its own context reports the fault, stickily.
int Faulter(const char* visible) {
  if (visible) setenv("CUDA_VISIBLE_DEVICES", visible, 1);
  CUcontext ctx;
  CUmodule module;
  CUfunction fault;
  if (cuInit(0) || cuDevicePrimaryCtxRetain(&ctx, 0) || cuCtxSetCurrent(ctx)) return 1;
  if (cuModuleLoadData(&module, kFaultPtx) || cuModuleGetFunction(&fault, module, "fault_illegal_address")) return 2;
  if (cuLaunchKernel(fault, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr) != CUDA_SUCCESS) return 3;
  if (cuCtxSynchronize() != CUDA_ERROR_ILLEGAL_ADDRESS) return 4;
  CUdeviceptr p;
  if (cuMemAlloc(&p, 1024) != CUDA_ERROR_ILLEGAL_ADDRESS) return 5;  // sticky
  return 0;
}

// The bystander's exit code when the faulter faults while it runs.
int BystanderBeside(const char* bystander_visible, const char* faulter_visible) {
  ForkedChild bystander([&](int fd) { return Bystander(bystander_visible, 800'000'000, fd); });
  EXPECT_TRUE(bystander.WaitSignal());
  usleep(100'000);
  ForkedChild faulter([&](int) { return Faulter(faulter_visible); });
  EXPECT_EQ(faulter.Wait(), 0);
  return bystander.Wait();
}

using SimFaultTest = SimTest;

TEST_F(SimFaultTest, TimeSlicedFaultBreaksOnlyTheFaultingContext) { EXPECT_EQ(BystanderBeside(nullptr, nullptr), 0); }

TEST_F(SimFaultTest, UnderMpsAFaultIsReportedToEveryClientOfTheGpu) {
  SetEnv("GPUSLICE_SIM_MPS", "1");
  EXPECT_EQ(BystanderBeside(nullptr, nullptr), kSawFault);
  // A client that starts after the fault has a working context.
  ForkedChild later([](int fd) { return Bystander(nullptr, 50'000'000, fd); });
  EXPECT_EQ(later.Wait(), 0);
}

TEST_F(SimFaultTest, UnderMpsAClientOfAnotherGpuIsNotTold) {
  SetEnv("GPUSLICE_SIM_MPS", "1");
  SetEnv("GPUSLICE_SIM_DEVICES", "2");
  EXPECT_EQ(BystanderBeside("1", "0"), 0);
}

TEST_F(SimFaultTest, AFaultInOneMigInstanceDoesNotTouchAnother) {
  SetEnv("GPUSLICE_SIM_MODEL", "H200");
  SetEnv("GPUSLICE_SIM_MIG", "3g.71gb,3g.71gb");
  ForkedChild creator([](int) { return cuInit(0) == CUDA_SUCCESS ? 0 : 1; });
  ASSERT_EQ(creator.Wait(), 0);
  simquery::Snapshot snap;
  std::string error;
  ASSERT_TRUE(simquery::TakeSnapshot(state_path(), &snap, &error)) << error;
  const std::string a = snap.devices[0].mig_instances[0].uuid, b = snap.devices[0].mig_instances[1].uuid;
  EXPECT_EQ(BystanderBeside(b.c_str(), a.c_str()), 0);
}

}  // namespace
}  // namespace gpuslice::testing
