// The simulated driver's MPS v3 memory partitioning (sim/memory_partitioning.h), as NVIDIA
// documents it for r615: off on older drivers; NVML sets a cgroup's hard and soft limits (root
// only) and reads them (anyone); a process of the cgroup, or of a descendant, is refused past
// the hard limit with CUDA_ERROR_OUT_OF_MEMORY, whatever it preloads or not, and cuMemGetInfo
// and NVML report the limit; MIG handles are refused.
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <string>

#define NVML_NO_UNVERSIONED_FUNC_DEFS
#include "common/nvml_api.h"
#include "sim/memory_partitioning.h"
#include "sim/sim_state.h"
#include "tests/support/shim_fixture.h"

namespace gpuslice::testing {
namespace {

struct Nvml {
  void* handle = nullptr;
  decltype(&::nvmlInit_v2) init = nullptr;
  decltype(&::nvmlShutdown) shutdown = nullptr;
  decltype(&::nvmlSystemGetDriverVersion) driver_version = nullptr;
  decltype(&::nvmlDeviceGetHandleByIndex_v2) handle_by_index = nullptr;
  decltype(&::nvmlDeviceGetMemoryInfo) memory_info = nullptr;
  decltype(&::nvmlDeviceSetMemoryLimits_v1) set = nullptr;
  decltype(&::nvmlDeviceGetMemoryLimits_v1) get = nullptr;
};

const Nvml& Library() {
  static const Nvml* nvml = [] {
    auto* n = new Nvml;
    n->handle = dlopen((SimLibDir() + "/libnvidia-ml.so.1").c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!n->handle) return n;
    n->init = reinterpret_cast<decltype(n->init)>(dlsym(n->handle, "nvmlInit_v2"));
    n->shutdown = reinterpret_cast<decltype(n->shutdown)>(dlsym(n->handle, "nvmlShutdown"));
    n->driver_version = reinterpret_cast<decltype(n->driver_version)>(dlsym(n->handle, "nvmlSystemGetDriverVersion"));
    n->handle_by_index =
        reinterpret_cast<decltype(n->handle_by_index)>(dlsym(n->handle, "nvmlDeviceGetHandleByIndex_v2"));
    n->memory_info = reinterpret_cast<decltype(n->memory_info)>(dlsym(n->handle, "nvmlDeviceGetMemoryInfo"));
    n->set = reinterpret_cast<decltype(n->set)>(dlsym(n->handle, "nvmlDeviceSetMemoryLimits_v1"));
    n->get = reinterpret_cast<decltype(n->get)>(dlsym(n->handle, "nvmlDeviceGetMemoryLimits_v1"));
    return n;
  }();
  return *nvml;
}

class SimMemoryPartitioningTest : public SimTest {
 protected:
  void SetUp() override {
    SimTest::SetUp();
    SetEnv("GPUSLICE_SIM_MEMORY", "4Gi");
    ASSERT_NE(Library().set, nullptr) << "nvmlDeviceSetMemoryLimits_v1 is not exported";
    cgroup_ = sim::OwnCgroupPath();
    ASSERT_FALSE(cgroup_.empty()) << "this machine has no cgroup v2 line in /proc/self/cgroup";
  }
  void TearDown() override {
    if (initialised_) Library().shutdown();
    SimTest::TearDown();
  }
  nvmlDevice_t Device(unsigned int index = 0) {
    if (!initialised_) {
      EXPECT_EQ(Library().init(), NVML_SUCCESS);
      initialised_ = true;
    }
    nvmlDevice_t device = nullptr;
    EXPECT_EQ(Library().handle_by_index(index, &device), NVML_SUCCESS);
    return device;
  }
  nvmlReturn_t Set(nvmlDevice_t device, const std::string& cgroup, uint64_t soft, uint64_t hard) {
    nvmlSetMemoryLimits_v1_t limits{cgroup.c_str(), soft, hard};
    return Library().set(device, &limits);
  }
  // A process of this test's own cgroup, without the preload: 256 MiB at a time, 8 times.
  Json AllocateWithoutPreload() {
    const ProcessResult r = gpuslice::testing::Run({App("direct"), "alloc", "--chunk", "256Mi", "--count", "8"},
                                                   {"LD_LIBRARY_PATH=" + SimLibDir()});
    EXPECT_EQ(r.exit_code, 0) << Describe(r);
    return ResultOf(r);
  }
  std::string cgroup_;
  bool initialised_ = false;
};

TEST_F(SimMemoryPartitioningTest, ADriverBeforeR615HasNone) {
  char version[80] = {};
  nvmlDevice_t device = Device();
  ASSERT_EQ(Library().driver_version(version, sizeof version), NVML_SUCCESS);
  EXPECT_STREQ(version, "580.00-sim");
  EXPECT_EQ(Set(device, cgroup_, kGi, kGi), NVML_ERROR_NOT_SUPPORTED);
  nvmlGetMemoryLimits_v1_t limits{cgroup_.c_str(), 0, 0, 0};
  EXPECT_EQ(Library().get(device, &limits), NVML_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(AllocateWithoutPreload().value("allocated", -1), 8);
}

TEST_F(SimMemoryPartitioningTest, AProcessOfALimitedCgroupIsRefusedPastTheHardLimitWithOrWithoutAPreload) {
  SetEnv("GPUSLICE_SIM_DRIVER_VERSION", "615.12");
  nvmlDevice_t device = Device();
  char version[80] = {};
  ASSERT_EQ(Library().driver_version(version, sizeof version), NVML_SUCCESS);
  EXPECT_STREQ(version, "615.00-sim");
  EXPECT_EQ(AllocateWithoutPreload().value("allocated", -1), 8) << "no limit yet: the whole device";
  ASSERT_EQ(Set(device, cgroup_, 512 * kMi, kGi), NVML_SUCCESS);
  const Json limited = AllocateWithoutPreload();
  EXPECT_EQ(limited.value("allocated", -1), 4) << limited.dump();
  EXPECT_EQ(limited["refusals"].value("CUDA_ERROR_OUT_OF_MEMORY", 0), 4) << limited.dump();
  EXPECT_EQ(limited["mem_before"].value("total", uint64_t{0}), kGi) << "cuMemGetInfo's total: the hard limit";
  nvmlMemory_t memory{};
  ASSERT_EQ(Library().memory_info(device, &memory), NVML_SUCCESS);
  EXPECT_EQ(memory.total, kGi) << "NVML's, in the limited cgroup, too";
  nvmlGetMemoryLimits_v1_t limits{cgroup_.c_str(), 0, 0, 0};
  ASSERT_EQ(Library().get(device, &limits), NVML_SUCCESS);
  EXPECT_EQ(limits.softLimit, 512 * kMi);
  EXPECT_EQ(limits.hardLimit, kGi);
  // Cleared (soft 0, hard NVML_DEVICE_MEMORY_LIMIT_MAX): the whole device again.
  ASSERT_EQ(Set(device, cgroup_, 0, NVML_DEVICE_MEMORY_LIMIT_MAX), NVML_SUCCESS);
  ASSERT_EQ(Library().get(device, &limits), NVML_SUCCESS);
  EXPECT_EQ(limits.hardLimit, NVML_DEVICE_MEMORY_LIMIT_MAX);
  EXPECT_EQ(AllocateWithoutPreload().value("allocated", -1), 8);
}

TEST_F(SimMemoryPartitioningTest, SettingNeedsRootAndReadingDoesNot) {
  SetEnv("GPUSLICE_SIM_DRIVER_VERSION", "615");
  nvmlDevice_t device = Device();
  const pid_t child = fork();
  if (child == 0) {
    // NVML is initialised and the state mapped: only the caller's privilege differs.
    if (seteuid(65534) != 0) _exit(3);
    nvmlGetMemoryLimits_v1_t limits{cgroup_.c_str(), 0, 0, 0};
    const bool refused = Set(device, cgroup_, 0, kGi) == NVML_ERROR_NO_PERMISSION;
    _exit(refused && Library().get(device, &limits) == NVML_SUCCESS ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  if (WEXITSTATUS(status) == 3) GTEST_SKIP() << "cannot drop privileges here (not root)";
  EXPECT_EQ(WEXITSTATUS(status), 0) << "an unprivileged caller set limits, or could not read them";
}

// The dmem controller's rule: a limit binds its cgroup and every descendant, never a sibling.
TEST_F(SimMemoryPartitioningTest, ALimitBindsItsCgroupsDescendantsAndNoSibling) {
  SetEnv("GPUSLICE_SIM_DRIVER_VERSION", "615");
  std::string error;
  std::unique_ptr<sim::SimState> state = sim::SimState::OpenOrCreate(&error);
  ASSERT_TRUE(state) << error;
  const std::string pod = "/sys/fs/cgroup/kubepods.slice/pod-a";
  ASSERT_EQ(sim::SetCgroupLimits(*state, 0, pod.c_str(), 0, kGi, true), NVML_SUCCESS);
  EXPECT_EQ(sim::CgroupRoomOf(*state, 0, pod).limit, kGi);
  EXPECT_EQ(sim::CgroupRoomOf(*state, 0, pod + "/container-1").limit, kGi);
  EXPECT_EQ(sim::CgroupRoomOf(*state, 0, pod + "-b").limit, UINT64_MAX) << "a sibling whose name extends it";
  EXPECT_EQ(sim::CgroupRoomOf(*state, 0, "/sys/fs/cgroup/kubepods.slice").limit, UINT64_MAX) << "its parent";
  EXPECT_EQ(sim::CgroupRoomOf(*state, 1, pod).limit, UINT64_MAX) << "another GPU";
  // The tighter of two nested limits binds.
  ASSERT_EQ(sim::SetCgroupLimits(*state, 0, (pod + "/container-1").c_str(), 0, 256 * kMi, true), NVML_SUCCESS);
  EXPECT_EQ(sim::CgroupRoomOf(*state, 0, pod + "/container-1").limit, 256 * kMi);
  EXPECT_EQ(sim::CgroupRoomOf(*state, 0, pod + "/container-2").limit, kGi);
}

TEST_F(SimMemoryPartitioningTest, MigHandlesAreRefusedAndTheirProcessesUnlimitedByIt) {
  SetEnv("GPUSLICE_SIM_DRIVER_VERSION", "615");
  SetEnv("GPUSLICE_SIM_MODEL", "H100-80GB");
  SetEnv("GPUSLICE_SIM_MIG", "3g.40gb,3g.40gb");
  nvmlDevice_t gpu = Device();
  EXPECT_EQ(Set(gpu, cgroup_, 0, kGi), NVML_ERROR_NOT_SUPPORTED) << "a GPU in MIG mode";
  auto handle_of_instance = reinterpret_cast<nvmlReturn_t (*)(nvmlDevice_t, unsigned int, nvmlDevice_t*)>(
      dlsym(Library().handle, "nvmlDeviceGetMigDeviceHandleByIndex"));
  ASSERT_NE(handle_of_instance, nullptr);
  nvmlDevice_t instance = nullptr;
  ASSERT_EQ(handle_of_instance(gpu, 0, &instance), NVML_SUCCESS);
  EXPECT_EQ(Set(instance, cgroup_, 0, kGi), NVML_ERROR_NOT_SUPPORTED) << "a MIG instance";
}

}  // namespace
}  // namespace gpuslice::testing
