// The simulated libnvidia-ml.so.1, called through its exported C ABI (dlopen by absolute path,
// as pynvml and the shim reach it): device identity as the ground truth has it, memory and
// processes of other processes, utilisation from busy time, and NVML's error conventions.
#include <dlfcn.h>
#include <signal.h>
#include <sys/time.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

// The legacy names are looked up as themselves, not as nvml.h's aliases of the _v2 calls.
#define NVML_NO_UNVERSIONED_FUNC_DEFS
#include "common/nvml_api.h"
#include "gpuslice/sim_query.h"
#include "sim/sim_state.h"
#include "tests/support/subprocess.h"
#include "tests/support/test_env.h"

namespace gpuslice::testing {
namespace {

using namespace std::chrono_literals;

// The exported functions, resolved by name from the built library.
struct NvmlLibrary {
  void* handle = nullptr;
#define GPUSLICE_NVML_FN(name) decltype(&::name) name = nullptr;
#define GPUSLICE_NVML_FUNCTIONS(X)           \
  X(nvmlInit_v2)                             \
  X(nvmlInitWithFlags)                       \
  X(nvmlShutdown)                            \
  X(nvmlErrorString)                         \
  X(nvmlSystemGetDriverVersion)              \
  X(nvmlSystemGetCudaDriverVersion)          \
  X(nvmlSystemGetCudaDriverVersion_v2)       \
  X(nvmlDeviceGetCount_v2)                   \
  X(nvmlDeviceGetHandleByIndex_v2)           \
  X(nvmlDeviceGetHandleByUUID)               \
  X(nvmlDeviceGetUUID)                       \
  X(nvmlDeviceGetName)                       \
  X(nvmlDeviceGetIndex)                      \
  X(nvmlDeviceGetCudaComputeCapability)      \
  X(nvmlDeviceGetMemoryInfo)                 \
  X(nvmlDeviceGetMemoryInfo_v2)              \
  X(nvmlDeviceGetComputeRunningProcesses_v3) \
  X(nvmlDeviceGetProcessUtilization)         \
  X(nvmlDeviceGetUtilizationRates)
  GPUSLICE_NVML_FUNCTIONS(GPUSLICE_NVML_FN)
  // Legacy entry points every libnvidia-ml still exports.
  GPUSLICE_NVML_FN(nvmlInit) GPUSLICE_NVML_FN(nvmlDeviceGetCount) GPUSLICE_NVML_FN(nvmlDeviceGetHandleByIndex)
};

const NvmlLibrary& Nvml() {
  static const NvmlLibrary* library = [] {
    auto* lib = new NvmlLibrary;
    const std::string path = SimLibDir() + "/libnvidia-ml.so.1";
    lib->handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib->handle == nullptr) {
      ADD_FAILURE() << "dlopen " << path << ": " << dlerror();
      return lib;
    }
#define GPUSLICE_NVML_RESOLVE(name)                                             \
  lib->name = reinterpret_cast<decltype(lib->name)>(dlsym(lib->handle, #name)); \
  EXPECT_NE(lib->name, nullptr) << #name " is not exported";
    GPUSLICE_NVML_FUNCTIONS(GPUSLICE_NVML_RESOLVE)
    GPUSLICE_NVML_RESOLVE(nvmlInit)
    GPUSLICE_NVML_RESOLVE(nvmlDeviceGetCount)
    GPUSLICE_NVML_RESOLVE(nvmlDeviceGetHandleByIndex)
    return lib;
  }();
  return *library;
}

uint64_t EpochMicros() {
  timeval tv;
  gettimeofday(&tv, nullptr);
  return static_cast<uint64_t>(tv.tv_sec) * 1'000'000ULL + static_cast<uint64_t>(tv.tv_usec);
}

// Waits for `text` on the child's stdout; a failure shows what the child printed instead.
::testing::AssertionResult Reached(Subprocess& child, const std::string& text) {
  if (child.WaitForOutput(text, 60000)) return ::testing::AssertionSuccess();
  const ProcessResult r = child.Wait(5000);
  return ::testing::AssertionFailure() << "the child never printed " << text << "; exit code " << r.exit_code
                                       << ", stdout: " << r.out << ", stderr: " << r.err;
}

std::vector<std::string> WorkloadEnv() { return {"LD_LIBRARY_PATH=" + SimLibDir()}; }
std::string Workload() { return BinDir() + "/gpuslice-workload"; }

// Each test starts with NVML initialised on a fresh simulated GPU and shuts it down after.
class SimNvmlTest : public SimTest {
 protected:
  void SetUp() override {
    SimTest::SetUp();
    ASSERT_NE(Nvml().handle, nullptr);
  }
  void TearDown() override {
    while (initialised_ > 0) {
      EXPECT_EQ(Nvml().nvmlShutdown(), NVML_SUCCESS);
      --initialised_;
    }
    SimTest::TearDown();
  }

  void Init() {
    ASSERT_EQ(Nvml().nvmlInit_v2(), NVML_SUCCESS);
    ++initialised_;
  }
  void Shutdown() {
    ASSERT_EQ(Nvml().nvmlShutdown(), NVML_SUCCESS);
    --initialised_;
  }
  nvmlDevice_t Device(unsigned int index) {
    nvmlDevice_t device = nullptr;
    EXPECT_EQ(Nvml().nvmlDeviceGetHandleByIndex_v2(index, &device), NVML_SUCCESS);
    return device;
  }
  std::vector<nvmlProcessInfo_t> RunningProcesses(nvmlDevice_t device) {
    unsigned int count = 0;
    nvmlReturn_t r = Nvml().nvmlDeviceGetComputeRunningProcesses_v3(device, &count, nullptr);
    if (r == NVML_SUCCESS) return {};
    EXPECT_EQ(r, NVML_ERROR_INSUFFICIENT_SIZE);
    std::vector<nvmlProcessInfo_t> infos(count + 4);  // room for processes that start meanwhile
    count = static_cast<unsigned int>(infos.size());
    EXPECT_EQ(Nvml().nvmlDeviceGetComputeRunningProcesses_v3(device, &count, infos.data()), NVML_SUCCESS);
    infos.resize(count);
    return infos;
  }
  // A simulated tenant in this process: its own mapping and liveness lock, as another process
  // using the simulated driver would have.
  std::unique_ptr<sim::SimState> RegisterTenant(int* slot) {
    std::string error;
    auto state = sim::SimState::OpenOrCreate(&error);
    EXPECT_NE(state, nullptr) << error;
    if (!state) return nullptr;
    const std::optional<int> registered = state->RegisterProcess();
    if (!registered) {
      ADD_FAILURE() << "no free process slot";
      return nullptr;
    }
    *slot = *registered;
    return state;
  }

 private:
  int initialised_ = 0;
};

TEST(NvmlApiTest, StructLayoutsMatchNvmlHeader) {
  EXPECT_EQ(sizeof(nvmlMemory_t), 24u);
  EXPECT_EQ(offsetof(nvmlMemory_t, free), 8u);
  EXPECT_EQ(offsetof(nvmlMemory_t, used), 16u);
  EXPECT_EQ(sizeof(nvmlMemory_v2_t), 40u);
  EXPECT_EQ(offsetof(nvmlMemory_v2_t, total), 8u);
  EXPECT_EQ(offsetof(nvmlMemory_v2_t, reserved), 16u);
  EXPECT_EQ(offsetof(nvmlMemory_v2_t, free), 24u);
  EXPECT_EQ(offsetof(nvmlMemory_v2_t, used), 32u);
  EXPECT_EQ(nvmlMemory_v2, 40u | (2u << 24));
  EXPECT_EQ(sizeof(nvmlProcessInfo_t), 24u);
  EXPECT_EQ(offsetof(nvmlProcessInfo_t, usedGpuMemory), 8u);
  EXPECT_EQ(offsetof(nvmlProcessInfo_t, gpuInstanceId), 16u);
  EXPECT_EQ(offsetof(nvmlProcessInfo_t, computeInstanceId), 20u);
  EXPECT_EQ(sizeof(nvmlProcessUtilizationSample_t), 32u);
  EXPECT_EQ(offsetof(nvmlProcessUtilizationSample_t, timeStamp), 8u);
  EXPECT_EQ(offsetof(nvmlProcessUtilizationSample_t, smUtil), 16u);
  EXPECT_EQ(offsetof(nvmlProcessUtilizationSample_t, decUtil), 28u);
  EXPECT_EQ(sizeof(nvmlUtilization_t), 8u);
  EXPECT_EQ(NVML_ERROR_INSUFFICIENT_SIZE, 7);
  EXPECT_EQ(NVML_ERROR_DRIVER_NOT_LOADED, 9);
  EXPECT_EQ(NVML_ERROR_ARGUMENT_VERSION_MISMATCH, 25);
  EXPECT_EQ(NVML_ERROR_UNKNOWN, 999);
}

TEST_F(SimNvmlTest, CallsBeforeInitReturnUninitialized) {
  unsigned int count = 0;
  nvmlDevice_t device = nullptr;
  EXPECT_EQ(Nvml().nvmlDeviceGetCount_v2(&count), NVML_ERROR_UNINITIALIZED);
  EXPECT_EQ(Nvml().nvmlDeviceGetHandleByIndex_v2(0, &device), NVML_ERROR_UNINITIALIZED);
  EXPECT_EQ(Nvml().nvmlShutdown(), NVML_ERROR_UNINITIALIZED);
  char version[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE];
  EXPECT_EQ(Nvml().nvmlSystemGetDriverVersion(version, sizeof version), NVML_ERROR_UNINITIALIZED);
  // Error strings need no initialisation.
  EXPECT_STREQ(Nvml().nvmlErrorString(NVML_ERROR_UNINITIALIZED), "Uninitialized");
  EXPECT_STREQ(Nvml().nvmlErrorString(static_cast<nvmlReturn_t>(12345)), "Unknown Error");
}

TEST_F(SimNvmlTest, InitIsReferenceCountedAndHandlesDieWithTheLastShutdown) {
  Init();
  ASSERT_EQ(Nvml().nvmlInit(), NVML_SUCCESS);  // the legacy name is the same call
  nvmlDevice_t device = Device(0);
  Shutdown();
  unsigned int index = 99;
  EXPECT_EQ(Nvml().nvmlDeviceGetIndex(device, &index), NVML_SUCCESS);
  EXPECT_EQ(index, 0u);
  Shutdown();
  EXPECT_EQ(Nvml().nvmlDeviceGetIndex(device, &index), NVML_ERROR_UNINITIALIZED);
  ASSERT_EQ(Nvml().nvmlInitWithFlags(NVML_INIT_FLAG_NO_GPUS), NVML_SUCCESS);
  EXPECT_EQ(Nvml().nvmlDeviceGetIndex(device, &index), NVML_SUCCESS);  // a handle outlives re-init
  EXPECT_EQ(Nvml().nvmlShutdown(), NVML_SUCCESS);
}

TEST_F(SimNvmlTest, DevicesMatchTheSimulatorsGroundTruth) {
  SetEnv("GPUSLICE_SIM_DEVICES", "3");
  SetEnv("GPUSLICE_SIM_MEMORY", "24Gi");
  SetEnv("GPUSLICE_SIM_NAME", "NVIDIA L4 (simulated)");
  SetEnv("GPUSLICE_SIM_COMPUTE_CAPABILITY", "8.9");
  Init();  // creates the devices: nobody used them before
  simquery::Snapshot snap;
  std::string error;
  ASSERT_TRUE(simquery::TakeSnapshot(state_path(), &snap, &error)) << error;
  ASSERT_EQ(snap.devices.size(), 3u);

  unsigned int count = 0;
  ASSERT_EQ(Nvml().nvmlDeviceGetCount_v2(&count), NVML_SUCCESS);
  EXPECT_EQ(count, 3u);
  ASSERT_EQ(Nvml().nvmlDeviceGetCount(&count), NVML_SUCCESS);
  EXPECT_EQ(count, 3u);
  for (unsigned int i = 0; i < count; ++i) {
    SCOPED_TRACE("device " + std::to_string(i));
    const simquery::DeviceSnapshot& truth = snap.devices[i];
    nvmlDevice_t device = Device(i);
    nvmlDevice_t legacy = nullptr;
    ASSERT_EQ(Nvml().nvmlDeviceGetHandleByIndex(i, &legacy), NVML_SUCCESS);
    EXPECT_EQ(legacy, device);
    char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
    ASSERT_EQ(Nvml().nvmlDeviceGetUUID(device, uuid, sizeof uuid), NVML_SUCCESS);
    EXPECT_EQ(uuid, truth.uuid);
    char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
    ASSERT_EQ(Nvml().nvmlDeviceGetName(device, name, sizeof name), NVML_SUCCESS);
    EXPECT_EQ(name, truth.name);
    EXPECT_STREQ(name, "NVIDIA L4 (simulated)");
    unsigned int index = 99;
    ASSERT_EQ(Nvml().nvmlDeviceGetIndex(device, &index), NVML_SUCCESS);
    EXPECT_EQ(index, i);
    nvmlDevice_t by_uuid = nullptr;
    ASSERT_EQ(Nvml().nvmlDeviceGetHandleByUUID(uuid, &by_uuid), NVML_SUCCESS);
    EXPECT_EQ(by_uuid, device);
    int major = 0, minor = 0;
    ASSERT_EQ(Nvml().nvmlDeviceGetCudaComputeCapability(device, &major, &minor), NVML_SUCCESS);
    EXPECT_EQ(major, truth.cc_major);
    EXPECT_EQ(minor, truth.cc_minor);
    EXPECT_EQ(major * 10 + minor, 89);
    nvmlMemory_t memory{};
    ASSERT_EQ(Nvml().nvmlDeviceGetMemoryInfo(device, &memory), NVML_SUCCESS);
    EXPECT_EQ(memory.total, truth.total_memory);
    EXPECT_EQ(memory.total, 24ULL << 30);
    EXPECT_EQ(memory.used, 0u);
    EXPECT_EQ(memory.free, memory.total);
  }
  char version[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE];
  ASSERT_EQ(Nvml().nvmlSystemGetDriverVersion(version, sizeof version), NVML_SUCCESS);
  EXPECT_GT(std::string(version).size(), 0u);
  int cuda = 0, cuda_v2 = 0;
  ASSERT_EQ(Nvml().nvmlSystemGetCudaDriverVersion(&cuda), NVML_SUCCESS);
  ASSERT_EQ(Nvml().nvmlSystemGetCudaDriverVersion_v2(&cuda_v2), NVML_SUCCESS);
  EXPECT_EQ(cuda, 13000);
  EXPECT_EQ(cuda_v2, cuda);
}

TEST_F(SimNvmlTest, BadArgumentsAreRefusedAsNvmlDoes) {
  Init();
  nvmlDevice_t device = Device(0);
  unsigned int count = 0;
  EXPECT_EQ(Nvml().nvmlDeviceGetCount_v2(nullptr), NVML_ERROR_INVALID_ARGUMENT);
  nvmlDevice_t out = nullptr;
  EXPECT_EQ(Nvml().nvmlDeviceGetHandleByIndex_v2(1, &out), NVML_ERROR_INVALID_ARGUMENT);  // one device
  EXPECT_EQ(Nvml().nvmlDeviceGetHandleByIndex_v2(0, nullptr), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(Nvml().nvmlDeviceGetHandleByUUID(nullptr, &out), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(Nvml().nvmlDeviceGetHandleByUUID("GPU-00000000-0000-0000-0000-000000000000", &out), NVML_ERROR_NOT_FOUND);

  int not_a_device = 0;
  auto* forged = reinterpret_cast<nvmlDevice_t>(&not_a_device);
  nvmlMemory_t memory{};
  EXPECT_EQ(Nvml().nvmlDeviceGetMemoryInfo(forged, &memory), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(Nvml().nvmlDeviceGetMemoryInfo(nullptr, &memory), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(Nvml().nvmlDeviceGetMemoryInfo(device, nullptr), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(Nvml().nvmlDeviceGetComputeRunningProcesses_v3(device, nullptr, nullptr), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(Nvml().nvmlDeviceGetProcessUtilization(device, nullptr, nullptr, 0), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(Nvml().nvmlDeviceGetUtilizationRates(device, nullptr), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(Nvml().nvmlDeviceGetIndex(device, nullptr), NVML_ERROR_INVALID_ARGUMENT);
  int major = 0;
  EXPECT_EQ(Nvml().nvmlDeviceGetCudaComputeCapability(device, &major, nullptr), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(Nvml().nvmlSystemGetCudaDriverVersion(nullptr), NVML_ERROR_INVALID_ARGUMENT);

  nvmlMemory_v2_t memory_v2{};
  memory_v2.version = 1;
  EXPECT_EQ(Nvml().nvmlDeviceGetMemoryInfo_v2(device, &memory_v2), NVML_ERROR_ARGUMENT_VERSION_MISMATCH);

  char small[8];
  EXPECT_EQ(Nvml().nvmlDeviceGetUUID(device, small, sizeof small), NVML_ERROR_INSUFFICIENT_SIZE);
  EXPECT_EQ(Nvml().nvmlDeviceGetName(device, small, sizeof small), NVML_ERROR_INSUFFICIENT_SIZE);
  char uuid[41];  // "GPU-" and 36 characters, and the terminator: exactly enough
  EXPECT_EQ(Nvml().nvmlDeviceGetUUID(device, uuid, sizeof uuid), NVML_SUCCESS);
  EXPECT_EQ(Nvml().nvmlDeviceGetUUID(device, uuid, sizeof uuid - 1), NVML_ERROR_INSUFFICIENT_SIZE);
  (void)count;
}

TEST_F(SimNvmlTest, InitOnAnIncompatibleStateFailsWithDriverNotLoaded) {
  {
    std::ofstream garbage(state_path(), std::ios::binary);
    garbage << std::string(4096, 'x');
  }
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(Nvml().nvmlInit_v2(), NVML_ERROR_DRIVER_NOT_LOADED);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find(state_path()), std::string::npos) << err;
  EXPECT_EQ(err.find('\n'), err.size() - 1) << "expected one line, got: " << err;
  unsigned int count = 0;
  EXPECT_EQ(Nvml().nvmlDeviceGetCount_v2(&count), NVML_ERROR_UNINITIALIZED);
  EXPECT_EQ(Nvml().nvmlShutdown(), NVML_ERROR_UNINITIALIZED);
}

TEST_F(SimNvmlTest, InitNeverRegistersAProcess) {
  Init();
  nvmlDevice_t device = Device(0);
  nvmlMemory_t memory{};
  ASSERT_EQ(Nvml().nvmlDeviceGetMemoryInfo(device, &memory), NVML_SUCCESS);
  EXPECT_TRUE(RunningProcesses(device).empty());
  std::string error;
  auto state = sim::SimState::OpenExisting(state_path(), &error);
  ASSERT_NE(state, nullptr) << error;
  for (const auto& slot : state->segment().slots)
    EXPECT_EQ(static_cast<sim::SlotState>(slot.state.load()), sim::SlotState::kFree);
}

TEST_F(SimNvmlTest, RunningProcessesFollowNvmlsSizeProtocol) {
  Init();
  nvmlDevice_t device = Device(0);
  unsigned int count = 0;
  EXPECT_EQ(Nvml().nvmlDeviceGetComputeRunningProcesses_v3(device, &count, nullptr), NVML_SUCCESS);
  EXPECT_EQ(count, 0u);

  int a = -1, b = -1, idle = -1;
  auto tenant_a = RegisterTenant(&a);
  auto tenant_b = RegisterTenant(&b);
  auto tenant_idle = RegisterTenant(&idle);  // registered, but holds nothing on the device
  ASSERT_TRUE(tenant_a && tenant_b && tenant_idle);
  ASSERT_TRUE(tenant_a->ChargeMemory(0, a, 100ULL << 20));
  tenant_b->device(0).processes[b].contexts.fetch_add(1);  // a context, no memory yet

  count = 0;
  EXPECT_EQ(Nvml().nvmlDeviceGetComputeRunningProcesses_v3(device, &count, nullptr), NVML_ERROR_INSUFFICIENT_SIZE);
  EXPECT_EQ(count, 2u);
  std::vector<nvmlProcessInfo_t> infos(4);
  count = 1;
  EXPECT_EQ(Nvml().nvmlDeviceGetComputeRunningProcesses_v3(device, &count, infos.data()), NVML_ERROR_INSUFFICIENT_SIZE);
  EXPECT_EQ(count, 2u);
  count = 4;
  ASSERT_EQ(Nvml().nvmlDeviceGetComputeRunningProcesses_v3(device, &count, infos.data()), NVML_SUCCESS);
  ASSERT_EQ(count, 2u);
  uint64_t memory_sum = 0;
  for (unsigned int i = 0; i < count; ++i) {
    EXPECT_EQ(infos[i].pid, static_cast<unsigned int>(getpid()));
    EXPECT_EQ(infos[i].gpuInstanceId, 0xFFFFFFFFu);
    EXPECT_EQ(infos[i].computeInstanceId, 0xFFFFFFFFu);
    memory_sum += infos[i].usedGpuMemory;
  }
  EXPECT_EQ(memory_sum, 100ULL << 20);

  tenant_a->UnregisterProcess(a);  // an orderly exit takes it off the list
  EXPECT_EQ(RunningProcesses(device).size(), 1u);
}

TEST_F(SimNvmlTest, ProcessUtilizationIsTheBusyFractionSinceTheNamedSample) {
  Init();
  nvmlDevice_t device = Device(0);
  int slot = -1;
  auto tenant = RegisterTenant(&slot);
  ASSERT_TRUE(tenant);
  auto& busy = tenant->device(0).processes[slot].busy_ns;
  unsigned int count = 0;
  // Registered but never ran a kernel: no utilisation to report.
  EXPECT_EQ(Nvml().nvmlDeviceGetProcessUtilization(device, nullptr, &count, 0), NVML_ERROR_NOT_FOUND);
  const uint64_t seen = EpochMicros();  // at or after that query's sample

  std::this_thread::sleep_for(200ms);
  busy.fetch_add(100'000'000);  // 100 ms of device time in a window of at least 200 ms
  count = 0;
  ASSERT_EQ(Nvml().nvmlDeviceGetProcessUtilization(device, nullptr, &count, seen), NVML_ERROR_INSUFFICIENT_SIZE);
  EXPECT_EQ(count, 1u);
  nvmlProcessUtilizationSample_t samples[2] = {};
  count = 0;
  EXPECT_EQ(Nvml().nvmlDeviceGetProcessUtilization(device, samples, &count, seen), NVML_ERROR_INSUFFICIENT_SIZE);
  EXPECT_EQ(count, 1u);
  count = 2;
  ASSERT_EQ(Nvml().nvmlDeviceGetProcessUtilization(device, samples, &count, seen), NVML_SUCCESS);
  ASSERT_EQ(count, 1u);
  EXPECT_EQ(samples[0].pid, static_cast<unsigned int>(getpid()));
  EXPECT_GT(samples[0].timeStamp, seen);
  EXPECT_LE(samples[0].timeStamp, EpochMicros());
  EXPECT_GE(samples[0].smUtil, 10u);  // 50% unless this machine stalled the test for long
  EXPECT_LE(samples[0].smUtil, 50u);

  // Nothing ran since that sample.
  const uint64_t last = samples[0].timeStamp;
  count = 2;
  EXPECT_EQ(Nvml().nvmlDeviceGetProcessUtilization(device, samples, &count, last), NVML_ERROR_NOT_FOUND);
  std::this_thread::sleep_for(100ms);
  busy.fetch_add(1'000'000'000);  // more device time than wall time: reported as 100%, no more
  count = 2;
  ASSERT_EQ(Nvml().nvmlDeviceGetProcessUtilization(device, samples, &count, last), NVML_SUCCESS);
  EXPECT_EQ(samples[0].smUtil, 100u);
  // A timestamp in the future names no sample.
  count = 2;
  EXPECT_EQ(Nvml().nvmlDeviceGetProcessUtilization(device, samples, &count, EpochMicros() + 60'000'000),
            NVML_ERROR_NOT_FOUND);
}

TEST_F(SimNvmlTest, UtilizationRatesFollowTheDevicesBusyTime) {
  Init();
  nvmlDevice_t device = Device(0);
  std::string error;
  auto state = sim::SimState::OpenExisting(state_path(), &error);
  ASSERT_NE(state, nullptr) << error;
  nvmlUtilization_t utilization{};
  std::this_thread::sleep_for(300ms);
  state->device(0).busy_ns.fetch_add(150'000'000);  // since creation: at most 50%
  ASSERT_EQ(Nvml().nvmlDeviceGetUtilizationRates(device, &utilization), NVML_SUCCESS);
  EXPECT_GE(utilization.gpu, 5u);
  EXPECT_LE(utilization.gpu, 50u);
  EXPECT_EQ(utilization.memory, 0u);
  std::this_thread::sleep_for(1200ms);  // a whole sampling period with no kernel
  ASSERT_EQ(Nvml().nvmlDeviceGetUtilizationRates(device, &utilization), NVML_SUCCESS);
  EXPECT_EQ(utilization.gpu, 0u);
}

TEST_F(SimNvmlTest, MemoryInfoCountsAnotherProcessUntilItIsKilled) {
  Init();
  nvmlDevice_t device = Device(0);
  nvmlMemory_t before{};
  ASSERT_EQ(Nvml().nvmlDeviceGetMemoryInfo(device, &before), NVML_SUCCESS);
  ASSERT_EQ(before.used, 0u);

  Subprocess child({Workload(), "memory", "--chunk", "256Mi", "--count", "2", "--hold", "5", "--ready-line"},
                   WorkloadEnv());
  ASSERT_TRUE(Reached(child, "\"event\":\"holding\""));

  nvmlMemory_t memory{};
  ASSERT_EQ(Nvml().nvmlDeviceGetMemoryInfo(device, &memory), NVML_SUCCESS);
  EXPECT_EQ(memory.total, before.total);
  EXPECT_GE(memory.used, 512ULL << 20);
  EXPECT_EQ(memory.free, memory.total - memory.used);
  nvmlMemory_v2_t memory_v2{};
  memory_v2.version = nvmlMemory_v2;
  ASSERT_EQ(Nvml().nvmlDeviceGetMemoryInfo_v2(device, &memory_v2), NVML_SUCCESS);
  EXPECT_EQ(memory_v2.version, nvmlMemory_v2);
  EXPECT_EQ(memory_v2.total, memory.total);
  EXPECT_EQ(memory_v2.reserved, 0u);
  EXPECT_EQ(memory_v2.used, memory.used);
  EXPECT_EQ(memory_v2.free, memory.free);

  const auto processes = RunningProcesses(device);
  ASSERT_EQ(processes.size(), 1u);
  EXPECT_EQ(processes[0].pid, static_cast<unsigned int>(child.pid()));
  EXPECT_EQ(processes[0].usedGpuMemory, memory.used);

  child.Kill(SIGKILL);
  child.Wait();
  ASSERT_EQ(Nvml().nvmlDeviceGetMemoryInfo(device, &memory), NVML_SUCCESS);
  EXPECT_EQ(memory.used, 0u);
  EXPECT_EQ(memory.free, memory.total);
  EXPECT_TRUE(RunningProcesses(device).empty());
}

TEST_F(SimNvmlTest, ProcessUtilizationShowsABusyWorkload) {
  Init();
  nvmlDevice_t device = Device(0);
  Subprocess child({Workload(), "compute", "--duration", "3", "--kernel-us", "2000", "--ready-line"}, WorkloadEnv());
  ASSERT_TRUE(Reached(child, "\"event\":\"ready\""));
  const uint64_t seen = EpochMicros();
  std::this_thread::sleep_for(1000ms);

  std::vector<nvmlProcessUtilizationSample_t> samples(8);
  unsigned int count = static_cast<unsigned int>(samples.size());
  ASSERT_EQ(Nvml().nvmlDeviceGetProcessUtilization(device, samples.data(), &count, seen), NVML_SUCCESS);
  bool found = false;
  for (unsigned int i = 0; i < count; ++i) {
    if (samples[i].pid != static_cast<unsigned int>(child.pid())) continue;
    found = true;
    // Alone on the device it keeps it busy nearly all the time; loose for a loaded machine.
    EXPECT_GE(samples[i].smUtil, 30u);
    EXPECT_LE(samples[i].smUtil, 100u);
  }
  EXPECT_TRUE(found);
  EXPECT_EQ(RunningProcesses(device).size(), 1u);
  nvmlUtilization_t utilization{};
  ASSERT_EQ(Nvml().nvmlDeviceGetUtilizationRates(device, &utilization), NVML_SUCCESS);
  EXPECT_GE(utilization.gpu, 30u);

  const ProcessResult result = child.Wait(60000);
  EXPECT_EQ(result.exit_code, 0) << result.err;
}

}  // namespace
}  // namespace gpuslice::testing
