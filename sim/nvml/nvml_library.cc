#include "sim/nvml/nvml_library.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

#include "sim/nvml/nvml_sim_devices.h"

#include "sim/sim_config.h"

namespace gpuslice::sim::nvml {
namespace {

// How often the sampler records the devices' busy time.
constexpr uint64_t kSampleEveryUs = 50'000;

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

}  // namespace

nvmlDevice_st* Handles() {
  static nvmlDevice_st* handles = [] {
    auto* h = new nvmlDevice_st[kMaxUnits];
    for (int i = 0; i < kMaxUnits; ++i) h[i].ordinal = i;
    return h;
  }();
  return handles;
}

Library& Lib() {
  static Library* library = new Library;
  return *library;
}

nvmlReturn_t InitLibrary() noexcept {
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

nvmlReturn_t ShutdownLibrary() noexcept {
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
}

std::optional<int> Session::Ordinal(nvmlDevice_t device) {
  for (int i = 0; i < kMaxUnits; ++i) {
    if (device != &Handles()[i]) continue;
    if (i < kMaxDevices) return i < state().device_count() ? std::optional<int>(i) : std::nullopt;
    return i - kMaxDevices < state().mig_instance_count() ? std::optional<int>(i) : std::nullopt;
  }
  return std::nullopt;
}

std::string Session::Uuid(int unit) {
  const auto& uuid = state().device(unit).config.uuid;
  return IsMig(unit) ? FormatMigUuid(uuid) : FormatGpuUuid(uuid);
}

uint64_t Session::MemoryUsed(int unit) {
  uint64_t used = state().MemoryUsed(unit);
  if (!IsMig(unit) && state().mig_enabled(unit)) {
    for (int i = 0; i < state().mig_instance_count(); ++i)
      if (state().segment().mig.instances[i].gpu == unit) used += state().MemoryUsed(kMaxDevices + i);
  }
  return used;
}

nvmlReturn_t CopyString(const std::string& text, char* out, unsigned int length) {
  if (out == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (text.size() + 1 > length) return NVML_ERROR_INSUFFICIENT_SIZE;
  std::memcpy(out, text.c_str(), text.size() + 1);
  return NVML_SUCCESS;
}

// nvml_sim_devices.h: what the files that leave nvml.h out need.

std::optional<int> UnitOf(nvmlDevice_st* device) {
  try {
    Session session;
    return session.ok() ? session.Ordinal(device) : std::nullopt;
  } catch (...) {
    return std::nullopt;
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
