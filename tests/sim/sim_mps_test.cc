// MPS on the simulated GPU (docs/simulator.md, MPS): with GPUSLICE_SIM_MPS=1 clients' kernels run
// at once on the SMs, each client capped by CUDA_MPS_ACTIVE_THREAD_PERCENTAGE, its memory by
// CUDA_MPS_PINNED_DEVICE_MEM_LIMIT. Every tenant is a separate process; the controls run the same
// tenants on the time-sliced device.
#include <cuda.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "common/clock.h"
#include "gpuslice/sim_query.h"
#include "sim/mps_client.h"
#include "tests/support/sim_driver_helpers.h"
#include "tests/support/spin_tenant.h"
#include "tests/support/test_env.h"

namespace gpuslice::testing {
namespace {

class SimMpsTest : public SimTest {
 protected:
  void SetUp() override {
    SimTest::SetUp();
    unsetenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE");
    unsetenv("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT");
    SetEnv("GPUSLICE_SIM_SM_COUNT", "132");
  }
};

struct Tenant {
  bool wide = true;
  int percentage = 100;  // CUDA_MPS_ACTIVE_THREAD_PERCENTAGE; 100 = unset
};

// A child running spin kernels of `wave_ns` for `run_ns` as an MPS client capped at its percentage.
int SpinTenant(Tenant t, uint64_t wave_ns, uint64_t run_ns, int fd) {
  if (t.percentage < 100) setenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", std::to_string(t.percentage).c_str(), 1);
  return SpinPairsUntil(t.wide, wave_ns, run_ns, fd);
}

struct Result {
  uint64_t kernels;
  uint64_t busy_ns;
};

// Runs the tenants at once for `run_ns`; their kernels and busy time from the ground truth.
std::vector<Result> RunTenants(const std::string& path, const std::vector<Tenant>& tenants, uint64_t run_ns) {
  std::vector<std::unique_ptr<ForkedChild>> children;
  // 10 ms waves: a loaded host's gaps between launches stay small beside them.
  for (const Tenant& t : tenants)
    children.push_back(std::make_unique<ForkedChild>([=](int fd) { return SpinTenant(t, 10'000'000, run_ns, fd); }));
  for (auto& c : children) EXPECT_TRUE(c->WaitSignal());
  for (auto& c : children) EXPECT_EQ(c->Wait(), 0);
  simquery::Snapshot snap;
  std::string error;
  EXPECT_TRUE(simquery::TakeSnapshot(path, &snap, &error)) << error;
  std::vector<Result> results;
  for (auto& c : children) {
    Result r{0, 0};
    for (const auto& p : snap.devices[0].processes)
      if (p.pid == c->pid()) r = {p.kernels, p.busy_ns};
    results.push_back(r);
  }
  return results;
}

constexpr uint64_t kRunNs = 1'000'000'000;

TEST(MpsClientTest, SmCapIsThePercentageRoundedUp) {
  EXPECT_EQ(sim::MpsSmCap(132, 50), 66);
  EXPECT_EQ(sim::MpsSmCap(132, 100), 132);
  EXPECT_EQ(sim::MpsSmCap(132, 33), 44);
  EXPECT_EQ(sim::MpsSmCap(132, 1), 2);
  EXPECT_EQ(sim::MpsSmCap(4, 10), 1);
}

TEST_F(SimMpsTest, BadClientVariablesFailCuInitNamingThem) {
  SetEnv("GPUSLICE_SIM_MPS", "1");
  sim::MpsClientSettings settings;
  std::string error;
  setenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "150", 1);
  EXPECT_FALSE(sim::LoadMpsClientSettings(&settings, &error));
  EXPECT_NE(error.find("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE='150'"), std::string::npos) << error;
  unsetenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE");
  setenv("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "0:1G", 1);
  EXPECT_FALSE(sim::LoadMpsClientSettings(&settings, &error));
  EXPECT_NE(error.find("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"), std::string::npos) << error;
  ForkedChild child([](int) { return cuInit(0) == CUDA_ERROR_NO_DEVICE ? 0 : 1; });
  EXPECT_EQ(child.Wait(), 0);
  setenv("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "0=1G,1=512MB,2=4096M", 1);
  ASSERT_TRUE(sim::LoadMpsClientSettings(&settings, &error)) << error;
  EXPECT_EQ(settings.memory_limit[0], 1ULL << 30);
  EXPECT_EQ(settings.memory_limit[1], 512ULL << 20);
  EXPECT_EQ(settings.memory_limit[2], 4096ULL << 20);
  unsetenv("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT");
}

// The target: two wide-kernel tenants capped at 50% each get half the SMs, at once. Control: a
// tenant capped at 50% on the time-sliced device is not capped (it gets every SM alone).
TEST_F(SimMpsTest, TwoWideTenantsCappedAtHalfEachGetHalfTheSms) {
  SetEnv("GPUSLICE_SIM_MPS", "1");
  const double alone = static_cast<double>(RunTenants(state_path(), {{true, 100}}, kRunNs)[0].kernels);
  ASSERT_GT(alone, 50);
  const auto pair = RunTenants(state_path(), {{true, 50}, {true, 50}}, kRunNs);
  const double share0 = pair[0].kernels / alone, share1 = pair[1].kernels / alone;
  const double sm0 = pair[0].busy_ns / 1e9, sm1 = pair[1].busy_ns / 1e9;
  std::printf(
      "MPS 50/50, wide kernels: throughput %.3f and %.3f of one unrestricted client alone; "
      "SM-time %.3f and %.3f of the run\n",
      share0, share1, sm0, sm1);
  EXPECT_NEAR(share0, 0.5, 0.1);
  EXPECT_NEAR(share1, 0.5, 0.1);
  EXPECT_NEAR(sm0, 0.5, 0.1);
  EXPECT_NEAR(sm1, 0.5, 0.1);
  const auto capped_alone = RunTenants(state_path(), {{true, 50}}, kRunNs)[0];
  EXPECT_NEAR(capped_alone.kernels / alone, 0.5, 0.1) << "the cap holds with the other half idle";
}

TEST_F(SimMpsTest, ControlTimeSlicingIgnoresTheMpsPercentage) {
  const double alone = static_cast<double>(RunTenants(state_path(), {{true, 100}}, kRunNs)[0].kernels);
  const auto capped_alone = RunTenants(state_path(), {{true, 50}}, kRunNs)[0];
  EXPECT_GT(capped_alone.kernels / alone, 0.85);
}

// Narrow kernels of two clients run at once under MPS (each keeps its alone throughput); on the
// time-sliced device (the control) they take turns and each gets about half.
TEST_F(SimMpsTest, NarrowKernelsOfTwoClientsRunConcurrently) {
  SetEnv("GPUSLICE_SIM_MPS", "1");
  const double alone = static_cast<double>(RunTenants(state_path(), {{false, 100}}, kRunNs)[0].kernels);
  const auto pair = RunTenants(state_path(), {{false, 100}, {false, 100}}, kRunNs);
  EXPECT_GT(pair[0].kernels / alone, 0.85);
  EXPECT_GT(pair[1].kernels / alone, 0.85);
}

TEST_F(SimMpsTest, ControlNarrowKernelsTakeTurnsWhenTimeSliced) {
  const double alone = static_cast<double>(RunTenants(state_path(), {{false, 100}}, kRunNs)[0].kernels);
  const auto pair = RunTenants(state_path(), {{false, 100}, {false, 100}}, kRunNs);
  EXPECT_LT(pair[0].kernels / alone, 0.7);
  EXPECT_LT(pair[1].kernels / alone, 0.7);
}

// In a child: allocations of 256Mi until refused (at most 16); returns the count.
int AllocationsThatFit() {
  CUcontext ctx;
  if (cuInit(0) || cuDevicePrimaryCtxRetain(&ctx, 0) || cuCtxSetCurrent(ctx)) return 100;
  int n = 0;
  CUdeviceptr p;
  CUresult rc = CUDA_SUCCESS;
  while (n < 16 && (rc = cuMemAlloc(&p, 256ULL << 20)) == CUDA_SUCCESS) ++n;
  if (n < 16 && rc != CUDA_ERROR_OUT_OF_MEMORY) return 101;
  return n;
}

TEST_F(SimMpsTest, PinnedMemoryLimitRefusesAllocationsBeyondIt) {
  SetEnv("GPUSLICE_SIM_MPS", "1");
  SetEnv("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "0=1G");
  ForkedChild limited([](int) { return AllocationsThatFit(); });
  EXPECT_EQ(limited.Wait(), 4);
}

TEST_F(SimMpsTest, ControlPinnedMemoryLimitMeansNothingWithoutMps) {
  SetEnv("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "0=1G");
  ForkedChild unlimited([](int) { return AllocationsThatFit(); });
  EXPECT_EQ(unlimited.Wait(), 16);
}

// A client killed while its kernel holds every SM: the server gets the SMs back and the other
// client goes on.
TEST_F(SimMpsTest, SmsOfAKilledClientGoBackToTheServer) {
  SetEnv("GPUSLICE_SIM_MPS", "1");
  ForkedChild victim([](int fd) { return SpinTenant({true, 100}, 500'000'000, 10'000'000'000ULL, fd); });
  ASSERT_TRUE(victim.WaitSignal());
  usleep(100'000);  // its first kernel now holds all 132 SMs for 500 ms
  ForkedChild survivor([](int fd) { return SpinTenant({true, 100}, 2'000'000, 500'000'000, fd); });
  ASSERT_TRUE(survivor.WaitSignal());
  victim.Kill(SIGKILL);
  EXPECT_EQ(victim.Wait(), -SIGKILL);
  EXPECT_EQ(survivor.Wait(), 0);
  simquery::Snapshot snap;
  std::string error;
  ASSERT_TRUE(simquery::TakeSnapshot(state_path(), &snap, &error)) << error;
  uint64_t kernels = 0;
  for (const auto& p : snap.devices[0].processes)
    if (p.pid == survivor.pid()) kernels = p.kernels;
  EXPECT_GT(kernels, 50u);
}

}  // namespace
}  // namespace gpuslice::testing
