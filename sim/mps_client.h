// A process's MPS client settings, read at cuInit as the real driver reads them
// (docs/simulator.md, MPS): CUDA_MPS_ACTIVE_THREAD_PERCENTAGE caps the SMs its kernels may use,
// CUDA_MPS_PINNED_DEVICE_MEM_LIMIT the device memory it may hold per device.
#pragma once

#include <cstdint>
#include <string>

#include "sim/sim_state_layout.h"

namespace gpuslice::sim {

struct MpsClientSettings {
  int active_thread_percentage = 100;       // 1 to 100
  uint64_t memory_limit[kMaxDevices] = {};  // per CUDA ordinal; 0 = no limit
};

// Parses the two variables (unset: no limits). False with one line in *error naming the
// variable, the value and a valid example.
bool LoadMpsClientSettings(MpsClientSettings* out, std::string* error);

// SMs a client capped at `percentage` may use on a device of `sms`: the percentage of the SMs,
// rounded up, at least one.
inline int MpsSmCap(int sms, int percentage) {
  const int cap = (sms * percentage + 99) / 100;
  return cap < 1 ? 1 : (cap > sms ? sms : cap);
}

}  // namespace gpuslice::sim
