// The simulated libnvidia-ml.so.1's state, which its entry-point files (sim/nvml/*_sim.cc) share:
// the device handles, the mapped shared state, the utilisation samples, and the Session every
// call holds. Each of those files includes it first: it brings in NVML's declarations as the
// library exports them.
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
#pragma once

// NVML's declarations with default visibility (the library is built with -fvisibility=hidden); the
// version script keeps every other symbol local.
#define NVML_NO_UNVERSIONED_FUNC_DEFS
#pragma GCC visibility push(default)
#include "common/nvml_api.h"
#pragma GCC visibility pop

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include "sim/call_model.h"
#include "sim/nvml/nvml_entry.h"  // after nvml_api.h, whose types it names
#include "sim/nvml/nvml_samples.h"
#include "sim/sim_state.h"

// A device handle is the address of one of these; it stays valid across nvmlShutdown/nvmlInit.
struct nvmlDevice_st {
  int ordinal;
};

namespace gpuslice::sim::nvml {

// A process's or a GPU instance's "no MIG instance" (NVML's 0xFFFFFFFF).
inline constexpr unsigned int kNoMigInstance = 0xFFFFFFFFu;

// Handles 0-7 are the devices, kMaxDevices + i the MIG instance i (SimState::device's units).
nvmlDevice_st* Handles();

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
Library& Lib();

// nvmlInit: maps the state on the first call, takes a first sample and starts the sampler.
nvmlReturn_t InitLibrary() noexcept;
// nvmlShutdown: the last call unmaps the state and forgets the samples.
nvmlReturn_t ShutdownLibrary() noexcept;

// Holds the library lock for one API call; ok() is false before nvmlInit.
class Session {
 public:
  Session() : lock_(Lib().mutex) {}
  bool ok() const { return Lib().init_count > 0 && Lib().state != nullptr; }
  SimState& state() { return *Lib().state; }
  DeviceHistory& history(int ordinal) { return Lib().history[ordinal]; }

  // The ordinal behind a handle; none when it is not one of ours or names no present device.
  // MIG instances are units kMaxDevices + i.
  std::optional<int> Ordinal(nvmlDevice_t device);
  bool IsMig(int unit) const { return unit >= kMaxDevices; }
  // A device in MIG mode, or one of its instances: NVML reports no utilisation there.
  bool InMigMode(int unit) { return IsMig(unit) || state().mig_enabled(unit); }
  std::string Uuid(int unit);
  // Memory in use on a unit; on a device in MIG mode, the sum over its instances.
  uint64_t MemoryUsed(int unit);

 private:
  std::lock_guard<std::mutex> lock_;
};

// Copies `text` and its NUL to `out` of `length` bytes: NVML_ERROR_INSUFFICIENT_SIZE when it
// does not fit.
nvmlReturn_t CopyString(const std::string& text, char* out, unsigned int length);

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
    const std::optional<int> ordinal = session.Ordinal(device);
    if (!ordinal) return NVML_ERROR_INVALID_ARGUMENT;
    // A GPU that fell off the bus still has its handle, but every query of it fails.
    if (session.state().device(*ordinal).lost.load() != 0) return NVML_ERROR_GPU_IS_LOST;
    return body(session, *ordinal);
  });
}

}  // namespace gpuslice::sim::nvml
