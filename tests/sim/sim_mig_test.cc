// MIG on the simulated GPU (docs/simulator.md, MIG): a layout named by GPUSLICE_SIM_MIG becomes
// instances with their own memory, SMs and MIG- UUID; CUDA enumerates the one
// CUDA_VISIBLE_DEVICES names; NVML reports MIG mode and the instances; kernels and failures in
// one instance never reach another. Every process here is a separate process on the same state.
#include <cuda.h>
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#define NVML_NO_UNVERSIONED_FUNC_DEFS
#include "common/clock.h"
#include "common/nvml_api.h"
#include "gpuslice/sim_query.h"
#include "sim/sim_config.h"
#include "tests/support/sim_driver_helpers.h"
#include "tests/support/spin_tenant.h"
#include "tests/support/test_env.h"

namespace gpuslice::testing {
namespace {

constexpr uint64_t kH200Memory = 143771ULL << 20;

class SimMigTest : public SimTest {
 protected:
  void SetUp() override {
    SimTest::SetUp();
    unsetenv("CUDA_VISIBLE_DEVICES");
    SetEnv("GPUSLICE_SIM_MODEL", "H200");
  }
  // Creates the state (a child's cuInit) and returns it.
  simquery::Snapshot Devices() {
    ForkedChild creator([](int) { return cuInit(0) == CUDA_SUCCESS ? 0 : 1; });
    EXPECT_EQ(creator.Wait(), 0);
    simquery::Snapshot snap;
    std::string error;
    EXPECT_TRUE(simquery::TakeSnapshot(state_path(), &snap, &error)) << error;
    return snap;
  }
};

// In a child: what CUDA enumerates with CUDA_VISIBLE_DEVICES=`visible` (nullptr: unset).
struct Enumerated {
  int count = -1;
  char name[96] = {};
  size_t total = 0;
  int sms = 0;
};

TEST_F(SimMigTest, LayoutBecomesInstancesWithTheirMemorySmsAndUuids) {
  SetEnv("GPUSLICE_SIM_MIG", "3g.71gb,2g.35gb,1g.18gb");
  const simquery::Snapshot snap = Devices();
  ASSERT_EQ(snap.devices.size(), 1u);
  const auto& gpu = snap.devices[0];
  EXPECT_TRUE(gpu.mig_enabled);
  EXPECT_EQ(gpu.total_memory, kH200Memory);
  ASSERT_EQ(gpu.mig_instances.size(), 3u);
  const char* profiles[] = {"3g.71gb", "2g.35gb", "1g.18gb"};
  const int slices[] = {4, 2, 1};
  const int sms[] = {60, 32, 16};
  for (int i = 0; i < 3; ++i) {
    const auto& m = gpu.mig_instances[i];
    EXPECT_EQ(m.mig_profile, profiles[i]);
    EXPECT_EQ(m.total_memory, kH200Memory / 8 * slices[i]);
    EXPECT_EQ(m.sm_count, sms[i]);
    EXPECT_EQ(m.uuid.rfind("MIG-", 0), 0u) << m.uuid;
    EXPECT_EQ(m.name, std::string("NVIDIA H200 MIG ") + profiles[i] + " (simulated)");
    for (int j = 0; j < i; ++j) EXPECT_NE(m.uuid, gpu.mig_instances[j].uuid);
  }
  EXPECT_EQ(gpu.mig_instances[0].mig_start, 0);  // 3g at 0, 2g at 4, 1g at 6
  EXPECT_EQ(gpu.mig_instances[1].mig_start, 4);
  EXPECT_EQ(gpu.mig_instances[2].mig_start, 6);
}

TEST_F(SimMigTest, InvalidLayoutIsRefusedWithAClearError) {
  SetEnv("GPUSLICE_SIM_MIG", "4g.71gb,4g.71gb");
  sim::SimConfig config;
  std::string error;
  EXPECT_FALSE(sim::LoadSimConfigFromEnv(&config, &error));
  EXPECT_NE(error.find("GPUSLICE_SIM_MIG='4g.71gb,4g.71gb'"), std::string::npos) << error;
  EXPECT_NE(error.find("at most 1"), std::string::npos) << error;
  ForkedChild child([](int) { return cuInit(0) == CUDA_ERROR_NO_DEVICE ? 0 : 1; });
  EXPECT_EQ(child.Wait(), 0);
  SetEnv("GPUSLICE_SIM_MIG", "3g.40gb");  // an H100 profile on the H200
  EXPECT_FALSE(sim::LoadSimConfigFromEnv(&config, &error));
  EXPECT_NE(error.find("3g.71gb"), std::string::npos) << "names the valid profiles: " << error;
  unsetenv("GPUSLICE_SIM_MODEL");
  SetEnv("GPUSLICE_SIM_MIG", "3g.71gb");
  EXPECT_FALSE(sim::LoadSimConfigFromEnv(&config, &error));
  EXPECT_NE(error.find("GPUSLICE_SIM_MODEL"), std::string::npos) << error;
}

// What a child process's CUDA sees with CUDA_VISIBLE_DEVICES set to `visible` (nullptr: unset).
int EnumerateIn(const char* visible, Enumerated* out) {
  int fds[2];
  if (pipe(fds) != 0) return -1;
  ForkedChild child([&](int) {
    close(fds[0]);
    if (visible) setenv("CUDA_VISIBLE_DEVICES", visible, 1);
    Enumerated e;
    if (cuInit(0) == CUDA_SUCCESS && cuDeviceGetCount(&e.count) == CUDA_SUCCESS && e.count > 0) {
      cuDeviceGetName(e.name, sizeof e.name, 0);
      cuDeviceTotalMem(&e.total, 0);
      cuDeviceGetAttribute(&e.sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0);
    } else {
      e.count = 0;
    }
    return write(fds[1], &e, sizeof e) == sizeof e ? 0 : 1;
  });
  close(fds[1]);
  const bool got = read(fds[0], out, sizeof *out) == sizeof *out;
  close(fds[0]);
  return got ? child.Wait() : -1;
}

TEST_F(SimMigTest, CudaEnumeratesTheInstanceCudaVisibleDevicesNames) {
  SetEnv("GPUSLICE_SIM_MIG", "3g.71gb,2g.35gb,1g.18gb");
  const simquery::Snapshot snap = Devices();
  const auto& instances = snap.devices[0].mig_instances;
  Enumerated e;
  ASSERT_EQ(EnumerateIn(instances[2].uuid.c_str(), &e), 0);
  EXPECT_EQ(e.count, 1);
  EXPECT_STREQ(e.name, "NVIDIA H200 MIG 1g.18gb (simulated)");
  EXPECT_EQ(e.total, kH200Memory / 8);
  EXPECT_EQ(e.sms, 16);
  ASSERT_EQ(EnumerateIn(instances[1].uuid.substr(0, 12).c_str(), &e), 0);  // a unique prefix
  EXPECT_STREQ(e.name, "NVIDIA H200 MIG 2g.35gb (simulated)");
  ASSERT_EQ(EnumerateIn(nullptr, &e), 0);  // unset: the first instance
  EXPECT_EQ(e.count, 1);
  EXPECT_STREQ(e.name, "NVIDIA H200 MIG 3g.71gb (simulated)");
  // One MIG device per process: the second MIG entry is not enumerated.
  ASSERT_EQ(EnumerateIn((instances[1].uuid + "," + instances[2].uuid).c_str(), &e), 0);
  EXPECT_EQ(e.count, 1);
  EXPECT_STREQ(e.name, "NVIDIA H200 MIG 2g.35gb (simulated)");
  ASSERT_EQ(EnumerateIn("MIG-00000000-0000-4000-8000-000000000000", &e), 0);  // names nothing
  EXPECT_EQ(e.count, 0);
}

TEST_F(SimMigTest, WholeDevicesHonourCudaVisibleDevicesToo) {
  SetEnv("GPUSLICE_SIM_DEVICES", "3");
  unsetenv("GPUSLICE_SIM_MODEL");
  Devices();
  Enumerated e;
  ASSERT_EQ(EnumerateIn("2,0", &e), 0);
  EXPECT_EQ(e.count, 2);
  ASSERT_EQ(EnumerateIn("1,7,0", &e), 0);  // enumeration stops at the invalid entry
  EXPECT_EQ(e.count, 1);
  ASSERT_EQ(EnumerateIn("", &e), 0);
  EXPECT_EQ(e.count, 0);
}

// In a child on the instance `uuid`: allocates `chunk` bytes until refused; returns the count.
int AllocateUntilRefused(const std::string& uuid, size_t chunk, int fd_out) {
  setenv("CUDA_VISIBLE_DEVICES", uuid.c_str(), 1);
  CUcontext ctx;
  if (cuInit(0) || cuDevicePrimaryCtxRetain(&ctx, 0) || cuCtxSetCurrent(ctx)) return 1;
  size_t free = 0, total = 0;
  if (cuMemGetInfo(&free, &total) || total != kH200Memory / 8) return 2;
  int n = 0;
  CUdeviceptr p;
  while (n < 1000 && cuMemAlloc(&p, chunk) == CUDA_SUCCESS) ++n;
  if (write(fd_out, &n, sizeof n) != sizeof n) return 3;
  pause();  // hold the memory until killed
  return 0;
}

TEST_F(SimMigTest, EachInstanceHasItsOwnMemory) {
  SetEnv("GPUSLICE_SIM_MIG", "1g.18gb,1g.18gb");
  const simquery::Snapshot snap = Devices();
  const auto& instances = snap.devices[0].mig_instances;
  const size_t chunk = 1ULL << 30;
  const int fit = static_cast<int>(kH200Memory / 8 / chunk);
  std::vector<std::unique_ptr<ForkedChild>> holders;
  for (int i = 0; i < 2; ++i) {
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    holders.push_back(std::make_unique<ForkedChild>([&](int) {
      close(fds[0]);
      return AllocateUntilRefused(instances[i].uuid, chunk, fds[1]);
    }));
    close(fds[1]);
    int n = -1;
    ASSERT_EQ(read(fds[0], &n, sizeof n), static_cast<ssize_t>(sizeof n));
    close(fds[0]);
    // The second instance's tenant gets all of its own slice although the first filled its own.
    EXPECT_EQ(n, fit) << "instance " << i;
  }
  simquery::Snapshot after;
  std::string error;
  ASSERT_TRUE(simquery::TakeSnapshot(state_path(), &after, &error)) << error;
  EXPECT_EQ(after.devices[0].mig_instances[0].used_memory, fit * chunk);
  EXPECT_EQ(after.devices[0].mig_instances[1].used_memory, fit * chunk);
  EXPECT_EQ(after.devices[0].used_memory, 2 * fit * chunk);
}

// A child on `uuid` running wide kernels of `wave_ns` for `run_ns`.
int WideKernels(const std::string& uuid, uint64_t wave_ns, uint64_t run_ns, int fd) {
  if (!uuid.empty()) setenv("CUDA_VISIBLE_DEVICES", uuid.c_str(), 1);
  return SpinPairsUntil(true, wave_ns, run_ns, fd);
}

// Kernels completed by `pid` on instance `instance`.
uint64_t KernelsOf(const std::string& path, int instance, pid_t pid) {
  simquery::Snapshot snap;
  std::string error;
  EXPECT_TRUE(simquery::TakeSnapshot(path, &snap, &error)) << error;
  for (const auto& p : snap.devices[0].mig_instances[instance].processes)
    if (p.pid == pid) return p.kernels;
  return 0;
}

// Runs one wide-kernel tenant per entry of `instances` (indexes into the layout) at the same
// time; returns each one's kernels.
std::vector<uint64_t> RunTenants(const std::string& path, const simquery::Snapshot& snap,
                                 const std::vector<int>& instances, uint64_t run_ns) {
  std::vector<std::unique_ptr<ForkedChild>> children;
  for (int i : instances) {
    const std::string uuid = snap.devices[0].mig_instances[i].uuid;
    // 10 ms waves: a loaded host's gaps between launches stay small beside them.
    children.push_back(
        std::make_unique<ForkedChild>([=](int fd) { return WideKernels(uuid, 10'000'000, run_ns, fd); }));
  }
  for (auto& c : children) EXPECT_TRUE(c->WaitSignal());
  for (auto& c : children) EXPECT_EQ(c->Wait(), 0);
  std::vector<uint64_t> kernels;
  for (size_t k = 0; k < children.size(); ++k) kernels.push_back(KernelsOf(path, instances[k], children[k]->pid()));
  return kernels;
}

// Two wide-kernel tenants in separate 3g instances each keep their alone throughput; the control,
// both in one instance, halves it (the instance time-slices them like a whole GPU does).
TEST_F(SimMigTest, KernelsInDifferentInstancesNeverSlowEachOther) {
  SetEnv("GPUSLICE_SIM_MIG", "3g.71gb,3g.71gb");
  const simquery::Snapshot snap = Devices();
  const uint64_t run_ns = 1'000'000'000;
  const double alone = static_cast<double>(RunTenants(state_path(), snap, {0}, run_ns)[0]);
  ASSERT_GT(alone, 50);
  const auto apart = RunTenants(state_path(), snap, {0, 1}, run_ns);
  const auto together = RunTenants(state_path(), snap, {1, 1}, run_ns);
  // KernelsOf sums a pid's kernels on an instance; each run uses fresh pids.
  const double apart0 = static_cast<double>(apart[0]) / alone, apart1 = static_cast<double>(apart[1]) / alone;
  const double together_sum = static_cast<double>(together[0] + together[1]) / alone;
  RecordProperty("apart_0_of_alone", std::to_string(apart0));
  RecordProperty("apart_1_of_alone", std::to_string(apart1));
  std::printf("alone %.0f kernels/s; separate 3g instances: %.3f and %.3f of alone; one instance: %.3f and %.3f\n",
              alone, apart0, apart1, together[0] / alone, together[1] / alone);
  EXPECT_GT(apart0, 0.85);
  EXPECT_GT(apart1, 0.85);
  EXPECT_LT(together[0] / alone, 0.7);  // the control: the same pair sharing one instance
  EXPECT_LT(together[1] / alone, 0.7);
  EXPECT_GT(together_sum, 0.8);
}

// A tenant killed in the middle of its kernels (holding its instance) stalls nobody in another
// instance, and its memory goes back to its own instance only.
TEST_F(SimMigTest, AProcessKilledInOneInstanceDoesNotTouchAnother) {
  SetEnv("GPUSLICE_SIM_MIG", "3g.71gb,3g.71gb");
  const simquery::Snapshot snap = Devices();
  const std::string a = snap.devices[0].mig_instances[0].uuid, b = snap.devices[0].mig_instances[1].uuid;
  ForkedChild victim([&](int fd) { return WideKernels(a, 50'000'000, 10'000'000'000ULL, fd); });
  ASSERT_TRUE(victim.WaitSignal());
  ForkedChild survivor([&](int fd) { return WideKernels(b, 2'000'000, 1'000'000'000, fd); });
  ASSERT_TRUE(survivor.WaitSignal());
  usleep(100'000);
  victim.Kill(SIGKILL);
  EXPECT_EQ(victim.Wait(), -SIGKILL);
  const uint64_t start = MonotonicNanos();
  EXPECT_EQ(survivor.Wait(), 0);
  EXPECT_LT(MonotonicNanos() - start, 3'000'000'000ULL);
  EXPECT_GT(KernelsOf(state_path(), 1, survivor.pid()), 200u);
}

// NVML's MIG queries, through the exported C ABI.
using GetMigMode = nvmlReturn_t (*)(nvmlDevice_t, unsigned int*, unsigned int*);
using IsMigHandle = nvmlReturn_t (*)(nvmlDevice_t, unsigned int*);
using MaxMigCount = nvmlReturn_t (*)(nvmlDevice_t, unsigned int*);
using MigHandleByIndex = nvmlReturn_t (*)(nvmlDevice_t, unsigned int, nvmlDevice_t*);
using ParentOfMig = nvmlReturn_t (*)(nvmlDevice_t, nvmlDevice_t*);
using GpuInstanceId = nvmlReturn_t (*)(nvmlDevice_t, unsigned int*);

TEST_F(SimMigTest, NvmlReportsMigModeTheInstancesAndTheirMemory) {
  SetEnv("GPUSLICE_SIM_MIG", "3g.71gb,2g.35gb,1g.18gb");
  const simquery::Snapshot snap = Devices();
  void* lib = dlopen((SimLibDir() + "/libnvidia-ml.so.1").c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(lib, nullptr) << dlerror();
#define RESOLVE(type, name)                              \
  auto name = reinterpret_cast<type>(dlsym(lib, #name)); \
  ASSERT_NE(name, nullptr) << #name " is not exported";
  RESOLVE(decltype(&::nvmlInit_v2), nvmlInit_v2)
  RESOLVE(decltype(&::nvmlDeviceGetHandleByIndex_v2), nvmlDeviceGetHandleByIndex_v2)
  RESOLVE(decltype(&::nvmlDeviceGetMemoryInfo), nvmlDeviceGetMemoryInfo)
  RESOLVE(decltype(&::nvmlDeviceGetUUID), nvmlDeviceGetUUID)
  RESOLVE(decltype(&::nvmlDeviceGetHandleByUUID), nvmlDeviceGetHandleByUUID)
  RESOLVE(GetMigMode, nvmlDeviceGetMigMode)
  RESOLVE(IsMigHandle, nvmlDeviceIsMigDeviceHandle)
  RESOLVE(MaxMigCount, nvmlDeviceGetMaxMigDeviceCount)
  RESOLVE(MigHandleByIndex, nvmlDeviceGetMigDeviceHandleByIndex)
  RESOLVE(ParentOfMig, nvmlDeviceGetDeviceHandleFromMigDeviceHandle)
  RESOLVE(GpuInstanceId, nvmlDeviceGetGpuInstanceId)
#undef RESOLVE
  ASSERT_EQ(nvmlInit_v2(), NVML_SUCCESS);
  nvmlDevice_t gpu;
  ASSERT_EQ(nvmlDeviceGetHandleByIndex_v2(0, &gpu), NVML_SUCCESS);
  unsigned int current = 9, pending = 9, is_mig = 9, max = 0;
  ASSERT_EQ(nvmlDeviceGetMigMode(gpu, &current, &pending), NVML_SUCCESS);
  EXPECT_EQ(current, 1u);
  EXPECT_EQ(pending, 1u);
  ASSERT_EQ(nvmlDeviceIsMigDeviceHandle(gpu, &is_mig), NVML_SUCCESS);
  EXPECT_EQ(is_mig, 0u);
  ASSERT_EQ(nvmlDeviceGetMaxMigDeviceCount(gpu, &max), NVML_SUCCESS);
  EXPECT_EQ(max, 7u);
  const uint64_t slices[] = {4, 2, 1};
  for (unsigned int i = 0; i < 3; ++i) {
    nvmlDevice_t mig, parent;
    ASSERT_EQ(nvmlDeviceGetMigDeviceHandleByIndex(gpu, i, &mig), NVML_SUCCESS);
    ASSERT_EQ(nvmlDeviceIsMigDeviceHandle(mig, &is_mig), NVML_SUCCESS);
    EXPECT_EQ(is_mig, 1u);
    ASSERT_EQ(nvmlDeviceGetDeviceHandleFromMigDeviceHandle(mig, &parent), NVML_SUCCESS);
    EXPECT_EQ(parent, gpu);
    unsigned int gi = 0;
    ASSERT_EQ(nvmlDeviceGetGpuInstanceId(mig, &gi), NVML_SUCCESS);
    EXPECT_EQ(gi, i + 1);
    nvmlMemory_t memory{};
    ASSERT_EQ(nvmlDeviceGetMemoryInfo(mig, &memory), NVML_SUCCESS);
    EXPECT_EQ(memory.total, kH200Memory / 8 * slices[i]);
    char uuid[96];
    ASSERT_EQ(nvmlDeviceGetUUID(mig, uuid, sizeof uuid), NVML_SUCCESS);
    EXPECT_EQ(uuid, snap.devices[0].mig_instances[i].uuid);
    nvmlDevice_t again;
    ASSERT_EQ(nvmlDeviceGetHandleByUUID(uuid, &again), NVML_SUCCESS);
    EXPECT_EQ(again, mig);
  }
  nvmlDevice_t none;
  EXPECT_EQ(nvmlDeviceGetMigDeviceHandleByIndex(gpu, 3, &none), NVML_ERROR_NOT_FOUND);
}

TEST_F(SimMigTest, NvmlOfAGpuWithoutMigSaysSo) {
  unsetenv("GPUSLICE_SIM_MODEL");
  Devices();
  void* lib = dlopen((SimLibDir() + "/libnvidia-ml.so.1").c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(lib, nullptr) << dlerror();
  auto init = reinterpret_cast<decltype(&::nvmlInit_v2)>(dlsym(lib, "nvmlInit_v2"));
  auto handle =
      reinterpret_cast<decltype(&::nvmlDeviceGetHandleByIndex_v2)>(dlsym(lib, "nvmlDeviceGetHandleByIndex_v2"));
  auto mode = reinterpret_cast<GetMigMode>(dlsym(lib, "nvmlDeviceGetMigMode"));
  ASSERT_EQ(init(), NVML_SUCCESS);
  nvmlDevice_t gpu;
  ASSERT_EQ(handle(0, &gpu), NVML_SUCCESS);
  unsigned int current = 9, pending = 9;
  ASSERT_EQ(mode(gpu, &current, &pending), NVML_SUCCESS);
  EXPECT_EQ(current, 0u);
}

}  // namespace
}  // namespace gpuslice::testing
