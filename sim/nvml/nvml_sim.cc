// The simulated libnvidia-ml.so.1: NVML's view of the simulated GPUs, read from the shared state
// the simulated libcuda writes. Monitoring tools (nvidia-smi-like pollers, pynvml, device
// plugins) and the shim's NVML hooks run against it unchanged.
//
// NVML users are observers, not tenants: this library maps the state (creating the devices when
// no process has yet, as a loaded kernel driver would have them) but never registers a process
// slot. Utilisation is derived, as the real driver does, from samples: every utilisation query
// records each process's and device's busy time with a timestamp in this library instance, and
// a later query reports the busy fraction between the sample a caller names and now. A device's
// utilisation is over the last sampling period whoever asks, as the driver's is: from nvmlInit
// on, a thread samples every device's busy time (as the driver samples its counters), and a
// process asking within its first period gets the time since its first sample, at least the
// shortest period a driver uses (it waits for that much, once).
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "sim/call_model.h"
#include "sim/memory_partitioning.h"
#include "sim/nvml/nvml_sim_devices.h"
#include "sim/sim_config.h"
#include "sim/sim_state.h"

// Exported with default visibility (the library is built with -fvisibility=hidden); the version
// script keeps every other symbol local.
#define NVML_NO_UNVERSIONED_FUNC_DEFS
#pragma GCC visibility push(default)
#include "common/nvml_api.h"
#pragma GCC visibility pop

#include "sim/nvml/nvml_entry.h"  // after nvml_api.h, whose types it names

// A device handle is the address of one of these; it stays valid across nvmlShutdown/nvmlInit.
struct nvmlDevice_st {
  int ordinal;
};

// This library's line in GPUSLICE_SIM_CALL_COUNTS (sim/call_model.h).
static const bool kCallModelNamed = (gpuslice::sim::call_model::SetLibraryName("nvml"), true);

namespace {

using gpuslice::sim::kMaxDevices;
using gpuslice::sim::kMaxProcesses;
using gpuslice::sim::kMaxUnits;
using gpuslice::sim::SimState;
using gpuslice::sim::SlotState;

// The driver's version is its branch (GPUSLICE_SIM_DRIVER_VERSION, 580 by default) and this.
constexpr char kDriverVersionSuffix[] = ".00-sim";
constexpr int kCudaDriverVersion = 13000;
// nvmlDeviceGetUtilizationRates reports over this period, like the driver's 1/6 s to 1 s sampling
// period (the longer one: fewer quantisation artefacts from whole kernels), and over no less than
// the shorter one for a process younger than the period.
constexpr uint64_t kUtilizationPeriodUs = 1'000'000;
constexpr uint64_t kShortestPeriodUs = 166'667;
// How often the sampler records the devices' busy time.
constexpr uint64_t kSampleEveryUs = 50'000;
// Samples kept per process and device: enough for pollers that name a timestamp from a few
// dozen queries back; older names get the oldest sample kept.
constexpr size_t kMaxSamples = 64;
constexpr unsigned int kNoMigInstance = 0xFFFFFFFFu;

// Handles 0-7 are the devices, kMaxDevices + i the MIG instance i (SimState::device's units).
nvmlDevice_st* Handles() {
  static nvmlDevice_st* handles = [] {
    auto* h = new nvmlDevice_st[kMaxUnits];
    for (int i = 0; i < kMaxUnits; ++i) h[i].ordinal = i;
    return h;
  }();
  return handles;
}

struct Sample {
  uint64_t time_us;  // microseconds since the epoch, as NVML timestamps are
  uint64_t busy_ns;
};

struct SlotHistory {
  uint64_t generation = 0;      // the slot's generation the samples belong to
  std::vector<Sample> samples;  // oldest first
};

struct DeviceHistory {
  std::vector<Sample> samples;     // the device's busy_ns, for GetUtilizationRates
  std::vector<SlotHistory> slots;  // per process slot, for GetProcessUtilization
};

struct Library {
  std::mutex mutex;
  int init_count = 0;  // nvmlInit calls not yet matched by nvmlShutdown
  std::unique_ptr<SimState> state;
  DeviceHistory history[kMaxUnits];
  pid_t sampler_pid = 0;  // the process whose sampler thread runs (a fork's child has none)
};

// Never destroyed: a monitoring thread may still call in while the process exits.
Library& Lib() {
  static Library* library = new Library;
  return *library;
}

uint64_t RealtimeNanos() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ULL + static_cast<uint64_t>(ts.tv_nsec);
}

// Now on both clocks, to place the state's CLOCK_MONOTONIC times on NVML's epoch timeline.
struct Clocks {
  uint64_t now_us;
  int64_t epoch_minus_monotonic_ns;
  uint64_t ToEpochMicros(uint64_t monotonic_ns) const {
    return static_cast<uint64_t>(static_cast<int64_t>(monotonic_ns) + epoch_minus_monotonic_ns) / 1000;
  }
};

Clocks ReadClocks() {
  const uint64_t mono = gpuslice::MonotonicNanos();
  const uint64_t real = RealtimeNanos();
  return Clocks{real / 1000, static_cast<int64_t>(real) - static_cast<int64_t>(mono)};
}

// The busy fraction between `base` and now, in percent (0-100, rounded).
unsigned int Percent(uint64_t busy_ns, uint64_t now_us, const Sample& base) {
  if (now_us <= base.time_us || busy_ns <= base.busy_ns) return 0;
  const double busy_us = static_cast<double>(busy_ns - base.busy_ns) / 1000.0;
  const double percent = 100.0 * busy_us / static_cast<double>(now_us - base.time_us);
  return static_cast<unsigned int>(std::min(100.0, percent + 0.5));
}

// The newest sample taken at or before `time_us`, or `origin` (a point known exactly, such as
// registration with zero busy time) when there is none.
Sample BaselineAt(const std::vector<Sample>& samples, uint64_t time_us, const Sample& origin) {
  Sample base = origin;
  for (const Sample& s : samples) {
    if (s.time_us > time_us) break;
    if (s.time_us >= base.time_us) base = s;
  }
  return base;
}

void Record(std::vector<Sample>* samples, Sample sample) {
  if (!samples->empty() && samples->back().time_us >= sample.time_us) return;
  samples->push_back(sample);
  if (samples->size() > kMaxSamples) samples->erase(samples->begin());
}

// Every whole device's busy time now (MIG instances report no utilisation). Under the lock.
void SampleDevices(Library& lib) {
  if (lib.init_count == 0 || !lib.state) return;
  const uint64_t now_us = RealtimeNanos() / 1000;
  for (int unit = 0; unit < lib.state->device_count(); ++unit)
    Record(&lib.history[unit].samples, Sample{now_us, lib.state->device(unit).busy_ns.load()});
}

// The driver's sampling, for this process: kMaxSamples samples kSampleEveryUs apart cover three
// periods. Never stopped (a process exits with it; nothing it uses is ever destroyed).
void StartSampler(Library& lib) {
  if (lib.sampler_pid == getpid()) return;
  std::thread([] {
    for (;;) {
      std::this_thread::sleep_for(std::chrono::microseconds(kSampleEveryUs));
      try {
        Library& lib = Lib();
        std::lock_guard<std::mutex> lock(lib.mutex);
        SampleDevices(lib);
      } catch (const std::exception&) {  // memory exhausted: this sample is missed, the next taken
      }
    }
  }).detach();
  lib.sampler_pid = getpid();  // once it runs: a thread the system refused is tried again
}

// Holds the library lock for one API call; ok() is false before nvmlInit.
class Session {
 public:
  Session() : lock_(Lib().mutex) {}
  bool ok() const { return Lib().init_count > 0 && Lib().state != nullptr; }
  SimState& state() { return *Lib().state; }
  DeviceHistory& history(int ordinal) { return Lib().history[ordinal]; }

  // The ordinal behind a handle, or -1 when it is not one of ours or names no present device.
  // MIG instances are units kMaxDevices + i.
  int Ordinal(nvmlDevice_t device) {
    for (int i = 0; i < kMaxUnits; ++i) {
      if (device != &Handles()[i]) continue;
      if (i < kMaxDevices) return i < state().device_count() ? i : -1;
      return i - kMaxDevices < state().mig_instance_count() ? i : -1;
    }
    return -1;
  }
  bool IsMig(int unit) const { return unit >= kMaxDevices; }
  // A device in MIG mode, or one of its instances: NVML reports no utilisation there.
  bool InMigMode(int unit) { return IsMig(unit) || Lib().state->mig_enabled(unit); }
  std::string Uuid(int unit) {
    const auto& uuid = state().device(unit).config.uuid;
    return IsMig(unit) ? gpuslice::sim::FormatMigUuid(uuid) : gpuslice::sim::FormatGpuUuid(uuid);
  }
  // Memory in use on a unit; on a device in MIG mode, the sum over its instances.
  uint64_t MemoryUsed(int unit) {
    uint64_t used = state().MemoryUsed(unit);
    if (!IsMig(unit) && state().mig_enabled(unit)) {
      for (int i = 0; i < state().mig_instance_count(); ++i)
        if (state().segment().mig.instances[i].gpu == unit) used += state().MemoryUsed(kMaxDevices + i);
    }
    return used;
  }

 private:
  std::lock_guard<std::mutex> lock_;
};

nvmlReturn_t CopyString(const std::string& text, char* out, unsigned int length) {
  if (out == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (text.size() + 1 > length) return NVML_ERROR_INSUFFICIENT_SIZE;
  std::memcpy(out, text.c_str(), text.size() + 1);
  return NVML_SUCCESS;
}

// No exception may cross the C ABI.
template <typename F>
nvmlReturn_t Guarded(F&& body) noexcept {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return NVML_ERROR_MEMORY;
  } catch (...) {
    return NVML_ERROR_UNKNOWN;
  }
}

// Runs `body(session, ordinal)` for a valid, initialised device.
template <typename F>
nvmlReturn_t WithDevice(nvmlDevice_t device, F&& body) noexcept {
  return Guarded([&]() -> nvmlReturn_t {
    Session session;
    if (!session.ok()) return NVML_ERROR_UNINITIALIZED;
    const int ordinal = session.Ordinal(device);
    if (ordinal < 0) return NVML_ERROR_INVALID_ARGUMENT;
    // A GPU that fell off the bus still has its handle, but every query of it fails.
    if (session.state().device(ordinal).lost.load() != 0) return NVML_ERROR_GPU_IS_LOST;
    return body(session, ordinal);
  });
}

nvmlReturn_t Init() noexcept {
  return Guarded([]() -> nvmlReturn_t {
    Library& lib = Lib();
    std::lock_guard<std::mutex> lock(lib.mutex);
    if (lib.init_count == 0) {
      std::string error;
      lib.state = SimState::OpenOrCreate(&error);
      if (!lib.state) {
        std::fprintf(stderr, "libnvidia-ml (gpuslice simulator): %s\n", error.c_str());
        return NVML_ERROR_DRIVER_NOT_LOADED;
      }
      for (DeviceHistory& h : lib.history) h = DeviceHistory{};
    }
    lib.init_count += 1;
    try {
      SampleDevices(lib);  // a first sample at once: the start of this process's first period
      StartSampler(lib);
    } catch (...) {  // not initialised: the error code says so
      lib.init_count -= 1;
      throw;
    }
    return NVML_SUCCESS;
  });
}

nvmlReturn_t DeviceCount(unsigned int* count) noexcept {
  return Guarded([&]() -> nvmlReturn_t {
    Session session;
    if (!session.ok()) return NVML_ERROR_UNINITIALIZED;
    if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *count = static_cast<unsigned int>(session.state().device_count());
    return NVML_SUCCESS;
  });
}

nvmlReturn_t HandleByIndex(unsigned int index, nvmlDevice_t* device) noexcept {
  return Guarded([&]() -> nvmlReturn_t {
    Session session;
    if (!session.ok()) return NVML_ERROR_UNINITIALIZED;
    if (device == nullptr || index >= static_cast<unsigned int>(session.state().device_count()))
      return NVML_ERROR_INVALID_ARGUMENT;
    *device = &Handles()[index];
    return NVML_SUCCESS;
  });
}

}  // namespace

// The MIG queries are not in common/nvml_api.h (the shim does not use them); declared here with
// nvml.h's signatures so that they are exported.
#pragma GCC visibility push(default)
extern "C" {
nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int* currentMode, unsigned int* pendingMode);
nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t device, unsigned int* isMigDevice);
nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned int* count);
nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device, unsigned int index, nvmlDevice_t* migDevice);
nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t migDevice, nvmlDevice_t* device);
nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t device, unsigned int* id);
nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t device, unsigned int* id);
nvmlReturn_t nvmlDeviceGetCpuAffinityWithinScope(nvmlDevice_t device, unsigned int nodeSetSize, unsigned long* nodeSet,
                                                 unsigned int scope);
}
#pragma GCC visibility pop

extern "C" {

nvmlReturn_t nvmlInit_v2(void) try {
  GPUSLICE_SIM_ENTRY();
  return Init();
} catch (...) {
  return EntryFailed<nvmlReturn_t>(__func__);
}
nvmlReturn_t nvmlInit(void) try {
  GPUSLICE_SIM_ENTRY();
  return Init();
} catch (...) {
  return EntryFailed<nvmlReturn_t>(__func__);
}
// Both flags (no GPUs needed, no attach) only relax what a real driver checks at init.
nvmlReturn_t nvmlInitWithFlags(unsigned int flags) try {
  GPUSLICE_SIM_ENTRY();
  return Init();
} catch (...) {
  return EntryFailed<nvmlReturn_t>(__func__);
}

nvmlReturn_t nvmlShutdown(void) try {
  GPUSLICE_SIM_ENTRY();
  return Guarded([]() -> nvmlReturn_t {
    Library& lib = Lib();
    std::lock_guard<std::mutex> lock(lib.mutex);
    if (lib.init_count == 0) return NVML_ERROR_UNINITIALIZED;
    if (--lib.init_count == 0) {
      lib.state.reset();
      for (DeviceHistory& h : lib.history) h = DeviceHistory{};
    }
    return NVML_SUCCESS;
  });
} catch (...) {
  return EntryFailed<nvmlReturn_t>(__func__);
}

const char* nvmlErrorString(nvmlReturn_t result) try {
  GPUSLICE_SIM_ENTRY();
  switch (result) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NO_PERMISSION: return "Insufficient Permissions";
    case NVML_ERROR_ALREADY_INITIALIZED: return "Already Initialized";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_INSUFFICIENT_POWER: return "Insufficient External Power";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_TIMEOUT: return "Timeout";
    case NVML_ERROR_IRQ_ISSUE: return "Interrupt Request Issue";
    case NVML_ERROR_LIBRARY_NOT_FOUND: return "NVML Shared Library Not Found";
    case NVML_ERROR_FUNCTION_NOT_FOUND: return "Function Not Found";
    case NVML_ERROR_CORRUPTED_INFOROM: return "Corrupted infoROM";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
    case NVML_ERROR_RESET_REQUIRED: return "GPU requires restart";
    case NVML_ERROR_OPERATING_SYSTEM: return "The operating system has blocked the request";
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH: return "RM has detected an NVML/RM version mismatch";
    case NVML_ERROR_IN_USE: return "In use by another client";
    case NVML_ERROR_MEMORY: return "Insufficient Memory";
    case NVML_ERROR_NO_DATA: return "No data";
    case NVML_ERROR_VGPU_ECC_NOT_ENABLED: return "ECC is not enabled";
    case NVML_ERROR_INSUFFICIENT_RESOURCES: return "Insufficient resources";
    case NVML_ERROR_FREQ_NOT_SUPPORTED: return "Frequency not supported";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH: return "Argument version mismatch";
    case NVML_ERROR_DEPRECATED: return "Deprecated";
    case NVML_ERROR_NOT_READY: return "Not ready";
    case NVML_ERROR_GPU_NOT_FOUND: return "GPU not found";
    case NVML_ERROR_INVALID_STATE: return "Invalid state";
    default: return "Unknown Error";
  }
} catch (...) {
  return EntryFailed<const char*>(__func__);
}

nvmlReturn_t nvmlSystemGetDriverVersion(char* version, unsigned int length) try {
  GPUSLICE_SIM_ENTRY();
  return Guarded([&]() -> nvmlReturn_t {
    Session session;
    if (!session.ok()) return NVML_ERROR_UNINITIALIZED;
    return CopyString(std::to_string(session.state().segment().partitioning.driver_branch) + kDriverVersionSuffix,
                      version, length);
  });
} catch (...) {
  return EntryFailed<nvmlReturn_t>(__func__);
}

nvmlReturn_t nvmlSystemGetCudaDriverVersion(int* cudaDriverVersion) try {
  GPUSLICE_SIM_ENTRY();
  return Guarded([&]() -> nvmlReturn_t {
    Session session;
    if (!session.ok()) return NVML_ERROR_UNINITIALIZED;
    if (cudaDriverVersion == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *cudaDriverVersion = kCudaDriverVersion;
    return NVML_SUCCESS;
  });
} catch (...) {
  return EntryFailed<nvmlReturn_t>(__func__);
}

nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int* cudaDriverVersion) try {
  GPUSLICE_SIM_ENTRY();
  return nvmlSystemGetCudaDriverVersion(cudaDriverVersion);
} catch (...) {
  return EntryFailed<nvmlReturn_t>(__func__);
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* deviceCount) try {
  GPUSLICE_SIM_ENTRY();
  return DeviceCount(deviceCount);
} catch (...) {
  return EntryFailed<nvmlReturn_t>(__func__);
}
nvmlReturn_t nvmlDeviceGetCount(unsigned int* deviceCount) try {
  GPUSLICE_SIM_ENTRY();
  return DeviceCount(deviceCount);
} catch (...) {
  return EntryFailed<nvmlReturn_t>(__func__);
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) try {
  GPUSLICE_SIM_ENTRY();
  return HandleByIndex(index, device);
} catch (...) {
  return EntryFailed<nvmlReturn_t>(__func__);
}
nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t* device) try {
  GPUSLICE_SIM_ENTRY();
  return HandleByIndex(index, device);
} catch (...) {
  return EntryFailed<nvmlReturn_t>(__func__);
}

nvmlReturn_t nvmlDeviceGetHandleByUUID(const char* uuid, nvmlDevice_t* device) try {
  GPUSLICE_SIM_ENTRY();
  return Guarded([&]() -> nvmlReturn_t {
    Session session;
    if (!session.ok()) return NVML_ERROR_UNINITIALIZED;
    if (uuid == nullptr || device == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    for (int i = 0; i < kMaxUnits; ++i) {
      if (session.Ordinal(&Handles()[i]) == i && session.Uuid(i) == uuid) {
        *device = &Handles()[i];
        return NVML_SUCCESS;
      }
    }
    return NVML_ERROR_NOT_FOUND;
  });
} catch (...) {
  return EntryFailed<nvmlReturn_t>(__func__);
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid, unsigned int length) try {
  GPUSLICE_SIM_ENTRY();
  return WithDevice(device,
                    [&](Session& session, int ordinal) { return CopyString(session.Uuid(ordinal), uuid, length); });
} catch (...) {
  return EntryFailed<nvmlReturn_t>(__func__);
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char* name, unsigned int length) try {
  GPUSLICE_SIM_ENTRY();
  return WithDevice(device, [&](Session& session, int ordinal) {
    const auto& config = session.state().device(ordinal).config;
    return CopyString(std::string(config.name, strnlen(config.name, sizeof config.name)), name, length);
  });
} catch (...) {
  return EntryFailed<nvmlReturn_t>(__func__);
}

nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int* index) try {
  GPUSLICE_SIM_ENTRY();
  return WithDevice(device, [&](Session& session, int ordinal) {
    if (index == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    // A MIG instance answers with its GPU's index.
    *index = static_cast<unsigned int>(
        session.IsMig(ordinal) ? session.state().segment().mig.instances[ordinal - kMaxDevices].gpu : ordinal);
    return NVML_SUCCESS;
  });
} catch (...) {
  return EntryFailed<nvmlReturn_t>(__func__);
}

nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int* major, int* minor) try {
  GPUSLICE_SIM_ENTRY();
  return WithDevice(device, [&](Session& session, int ordinal) {
    if (major == nullptr || minor == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *major = session.state().device(ordinal).config.cc_major;
    *minor = session.state().device(ordinal).config.cc_minor;
    return NVML_SUCCESS;
  });
} catch (...) {
  return EntryFailed<nvmlReturn_t>(__func__);
}

namespace {

struct MemoryFigures {
  uint64_t total, used, free;
};

// The device's memory; under a hard limit of the caller's cgroup (driver r615 and later), the
// cgroup's: the limit as the total, what the cgroup may still take as free.
MemoryFigures Figures(Session& session, int ordinal) {
  const uint64_t total = session.state().device(ordinal).config.total_memory;
  const uint64_t used = std::min(session.MemoryUsed(ordinal), total);
  const gpuslice::sim::CgroupRoom room =
      gpuslice::sim::CgroupRoomOf(session.state(), ordinal, gpuslice::sim::OwnCgroupPath());
  if (room.limit >= total) return {total, used, total - used};
  const uint64_t free = std::min(total - used, room.left);
  return {room.limit, room.limit - std::min(room.limit, free), std::min(free, room.limit)};
}

}  // namespace

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory) try {
  GPUSLICE_SIM_ENTRY();
  return WithDevice(device, [&](Session& session, int ordinal) {
    if (memory == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    const MemoryFigures figures = Figures(session, ordinal);
    memory->total = figures.total;
    memory->used = figures.used;
    memory->free = figures.free;
    return NVML_SUCCESS;
  });
} catch (...) {
  return EntryFailed<nvmlReturn_t>(__func__);
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t* memory) try {
  GPUSLICE_SIM_ENTRY();
  return WithDevice(device, [&](Session& session, int ordinal) {
    if (memory == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (memory->version != nvmlMemory_v2) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    const MemoryFigures figures = Figures(session, ordinal);
    memory->total = figures.total;
    memory->reserved = 0;  // the simulated driver keeps nothing back
    memory->used = figures.used;
    memory->free = figures.free;
    return NVML_SUCCESS;
  });
} catch (...) {
  return EntryFailed<nvmlReturn_t>(__func__);
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int* infoCount,
                                                     nvmlProcessInfo_t* infos) try {
  GPUSLICE_SIM_ENTRY();
  return WithDevice(device, [&](Session& session, int ordinal) {
    if (infoCount == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    SimState& state = session.state();
    state.ReapDeadProcesses();
    const auto& segment = state.segment();
    // A MIG instance lists its own processes; a device in MIG mode those of every instance, with
    // their GPU instance ids (compute instance 0: one per GPU instance).
    std::vector<int> units;
    if (session.IsMig(ordinal) || !state.mig_enabled(ordinal)) units.push_back(ordinal);
    else
      for (int i = 0; i < state.mig_instance_count(); ++i)
        if (segment.mig.instances[i].gpu == ordinal) units.push_back(kMaxDevices + i);
    std::vector<nvmlProcessInfo_t> found;
    for (int unit : units) {
      const auto& dev = state.device(unit);
      const bool mig = session.IsMig(unit);
      const unsigned int gi = mig ? static_cast<unsigned int>(segment.mig.instances[unit - kMaxDevices].gpu_instance_id)
                                  : kNoMigInstance;
      for (int s = 0; s < kMaxProcesses; ++s) {
        if (static_cast<SlotState>(segment.slots[s].state.load()) != SlotState::kLive) continue;
        const uint64_t memory = dev.processes[s].memory_used.load();
        if (memory == 0 && dev.processes[s].contexts.load() == 0) continue;
        found.push_back(
            nvmlProcessInfo_t{static_cast<unsigned int>(segment.slots[s].pid), memory, gi, mig ? 0u : kNoMigInstance});
      }
    }
    const auto needed = static_cast<unsigned int>(found.size());
    if (*infoCount < needed) {
      *infoCount = needed;
      return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    if (needed > 0 && infos == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    std::copy(found.begin(), found.end(), infos);
    *infoCount = needed;
    return NVML_SUCCESS;
  });
} catch (...) {
  return EntryFailed<nvmlReturn_t>(__func__);
}

nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t device, nvmlProcessUtilizationSample_t* utilization,
                                             unsigned int* processSamplesCount,
                                             unsigned long long lastSeenTimeStamp) try {
  GPUSLICE_SIM_ENTRY();
  return WithDevice(device, [&](Session& session, int ordinal) {
    if (processSamplesCount == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (session.InMigMode(ordinal)) return NVML_ERROR_NOT_SUPPORTED;  // as NVML under MIG
    SimState& state = session.state();
    state.ReapDeadProcesses();
    const Clocks clocks = ReadClocks();
    const auto& segment = state.segment();
    const auto& dev = state.device(ordinal);
    DeviceHistory& history = session.history(ordinal);
    history.slots.resize(kMaxProcesses);
    std::vector<nvmlProcessUtilizationSample_t> found;
    for (int s = 0; s < kMaxProcesses; ++s) {
      SlotHistory& slot_history = history.slots[s];
      const auto& slot = segment.slots[s];
      if (static_cast<SlotState>(slot.state.load()) == SlotState::kFree) continue;
      if (slot_history.generation != slot.generation) {  // the slot belongs to another process now
        slot_history.generation = slot.generation;
        slot_history.samples.clear();
      }
      const uint64_t busy = dev.processes[s].busy_ns.load();
      // Registration zeroes the busy time, so the process's start is a sample known exactly.
      const uint64_t started_us = clocks.ToEpochMicros(slot.started_ns);
      const Sample base =
          BaselineAt(slot_history.samples, std::max<uint64_t>(lastSeenTimeStamp, started_us), Sample{started_us, 0});
      Record(&slot_history.samples, Sample{clocks.now_us, busy});
      // As in NVML, only processes that used the device since the caller's timestamp appear.
      if (clocks.now_us <= lastSeenTimeStamp || busy <= base.busy_ns) continue;
      nvmlProcessUtilizationSample_t sample{};
      sample.pid = static_cast<unsigned int>(slot.pid);
      sample.timeStamp = clocks.now_us;
      sample.smUtil = Percent(busy, clocks.now_us, base);
      found.push_back(sample);
    }
    if (found.empty()) return NVML_ERROR_NOT_FOUND;
    const auto needed = static_cast<unsigned int>(found.size());
    if (utilization == nullptr || *processSamplesCount < needed) {
      *processSamplesCount = needed;
      return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    std::copy(found.begin(), found.end(), utilization);
    *processSamplesCount = needed;
    return NVML_SUCCESS;
  });
} catch (...) {
  return EntryFailed<nvmlReturn_t>(__func__);
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t* utilization) try {
  GPUSLICE_SIM_ENTRY();
  // A process younger than the shortest period waits for it once, without the library's lock.
  uint64_t wait_us = 0;
  WithDevice(device, [&](Session& session, int ordinal) {
    const std::vector<Sample>& samples = session.history(ordinal).samples;
    const uint64_t now_us = RealtimeNanos() / 1000;
    if (!samples.empty() && now_us < samples.front().time_us + kShortestPeriodUs)
      wait_us = samples.front().time_us + kShortestPeriodUs - now_us;
    return NVML_SUCCESS;
  });
  if (wait_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(wait_us));
  return WithDevice(device, [&](Session& session, int ordinal) {
    if (utilization == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (session.InMigMode(ordinal)) return NVML_ERROR_NOT_SUPPORTED;  // as NVML under MIG
    const Clocks clocks = ReadClocks();
    const uint64_t busy = session.state().device(ordinal).busy_ns.load();
    std::vector<Sample>& samples = session.history(ordinal).samples;
    const uint64_t period_start = clocks.now_us > kUtilizationPeriodUs ? clocks.now_us - kUtilizationPeriodUs : 0;
    // The newest sample that starts a whole period; in a process younger than that, its first.
    const Sample first = samples.empty() ? Sample{clocks.now_us, busy} : samples.front();
    const Sample base = BaselineAt(samples, period_start, first);
    Record(&samples, Sample{clocks.now_us, busy});
    utilization->gpu = Percent(busy, clocks.now_us, base);
    utilization->memory = 0;  // memory traffic is not simulated
    return NVML_SUCCESS;
  });
} catch (...) {
  return EntryFailed<nvmlReturn_t>(__func__);
}

// --- Topology ---

// The simulated node is a two-socket server: its GPUs split evenly over NUMA nodes 0 and 1 in
// index order (one GPU: node 0). Scope node (0) or socket (1) both answer that node; a MIG
// handle, as on NVIDIA's driver, does not answer topology queries (ask its GPU).
nvmlReturn_t nvmlDeviceGetCpuAffinityWithinScope(nvmlDevice_t device, unsigned int nodeSetSize, unsigned long* nodeSet,
                                                 unsigned int scope) try {
  GPUSLICE_SIM_ENTRY();
  return WithDevice(device, [&](Session& session, int ordinal) {
    if (nodeSet == nullptr || nodeSetSize == 0 || scope > 1) return NVML_ERROR_INVALID_ARGUMENT;
    if (session.IsMig(ordinal)) return NVML_ERROR_NOT_SUPPORTED;
    const int count = session.state().device_count();
    const int node = count >= 2 ? ordinal * 2 / count : 0;
    for (unsigned int i = 0; i < nodeSetSize; ++i) nodeSet[i] = 0;
    nodeSet[0] = 1UL << node;
    return NVML_SUCCESS;
  });
} catch (...) {
  return EntryFailed<nvmlReturn_t>(__func__);
}

// --- MIG (NVML's Multi Instance GPU management, the queries) ---

nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int* currentMode, unsigned int* pendingMode) try {
  GPUSLICE_SIM_ENTRY();
  return WithDevice(device, [&](Session& session, int ordinal) {
    if (currentMode == nullptr || pendingMode == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (session.IsMig(ordinal)) return NVML_ERROR_NOT_SUPPORTED;
    *currentMode = *pendingMode = session.state().mig_enabled(ordinal) ? 1u : 0u;  // NVML_DEVICE_MIG_ENABLE
    return NVML_SUCCESS;
  });
} catch (...) {
  return EntryFailed<nvmlReturn_t>(__func__);
}

nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t device, unsigned int* isMigDevice) try {
  GPUSLICE_SIM_ENTRY();
  return WithDevice(device, [&](Session& session, int ordinal) {
    if (isMigDevice == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *isMigDevice = session.IsMig(ordinal) ? 1u : 0u;
    return NVML_SUCCESS;
  });
} catch (...) {
  return EntryFailed<nvmlReturn_t>(__func__);
}

nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned int* count) try {
  GPUSLICE_SIM_ENTRY();
  return WithDevice(device, [&](Session& session, int ordinal) {
    if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (session.IsMig(ordinal)) return NVML_ERROR_NOT_SUPPORTED;
    *count = session.state().mig_enabled(ordinal) ? static_cast<unsigned int>(gpuslice::sim::kMaxMigInstancesPerGpu)
                                                  : 0u;
    return NVML_SUCCESS;
  });
} catch (...) {
  return EntryFailed<nvmlReturn_t>(__func__);
}

nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device, unsigned int index, nvmlDevice_t* migDevice) try {
  GPUSLICE_SIM_ENTRY();
  return WithDevice(device, [&](Session& session, int ordinal) {
    if (migDevice == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (session.IsMig(ordinal) || !session.state().mig_enabled(ordinal)) return NVML_ERROR_INVALID_ARGUMENT;
    unsigned int seen = 0;
    for (int i = 0; i < session.state().mig_instance_count(); ++i) {
      if (session.state().segment().mig.instances[i].gpu != ordinal) continue;
      if (seen++ == index) {
        *migDevice = &Handles()[kMaxDevices + i];
        return NVML_SUCCESS;
      }
    }
    return NVML_ERROR_NOT_FOUND;
  });
} catch (...) {
  return EntryFailed<nvmlReturn_t>(__func__);
}

nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t migDevice, nvmlDevice_t* device) try {
  GPUSLICE_SIM_ENTRY();
  return WithDevice(migDevice, [&](Session& session, int ordinal) {
    if (device == nullptr || !session.IsMig(ordinal)) return NVML_ERROR_INVALID_ARGUMENT;
    *device = &Handles()[session.state().segment().mig.instances[ordinal - kMaxDevices].gpu];
    return NVML_SUCCESS;
  });
} catch (...) {
  return EntryFailed<nvmlReturn_t>(__func__);
}

nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t device, unsigned int* id) try {
  GPUSLICE_SIM_ENTRY();
  return WithDevice(device, [&](Session& session, int ordinal) {
    if (id == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (!session.IsMig(ordinal)) return NVML_ERROR_NOT_SUPPORTED;
    *id = static_cast<unsigned int>(session.state().segment().mig.instances[ordinal - kMaxDevices].gpu_instance_id);
    return NVML_SUCCESS;
  });
} catch (...) {
  return EntryFailed<nvmlReturn_t>(__func__);
}

nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t device, unsigned int* id) try {
  GPUSLICE_SIM_ENTRY();
  return WithDevice(device, [&](Session& session, int ordinal) {
    if (id == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (!session.IsMig(ordinal)) return NVML_ERROR_NOT_SUPPORTED;
    *id = 0;  // one compute instance spanning each GPU instance
    return NVML_SUCCESS;
  });
} catch (...) {
  return EntryFailed<nvmlReturn_t>(__func__);
}

}  // extern "C"

namespace gpuslice::sim::nvml {

int UnitOf(nvmlDevice_st* device) {
  try {
    Session session;
    return session.ok() ? session.Ordinal(device) : -1;
  } catch (...) {
    return -1;
  }
}

nvmlDevice_st* HandleOf(int unit) { return &Handles()[unit]; }

int WithUnit(nvmlDevice_st* device, const std::function<int(SimState& state, int unit)>& body) {
  return WithDevice(device, [&](Session& session, int ordinal) {
    return static_cast<nvmlReturn_t>(body(session.state(), ordinal));
  });
}

bool XidWord(int unit, uint32_t* word) {
  try {
    Session session;
    if (!session.ok()) return false;
    *word = session.state().device(unit).xid.load();
    return true;
  } catch (...) {
    return false;
  }
}

}  // namespace gpuslice::sim::nvml
