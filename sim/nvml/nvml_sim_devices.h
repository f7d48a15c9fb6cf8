// What the simulated NVML's files that leave nvml.h out need of the library's state
// (nvml_library.h): a device handle's unit and a unit's handle, and a device's XID word
// (sim_state_layout.h).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>

#include "sim/sim_state.h"

// nvml.h's handle type, declared here so that this header leaves the NVML macros alone
// (NVML_NO_UNVERSIONED_FUNC_DEFS is the including file's to set).
struct nvmlDevice_st;

namespace gpuslice::sim::nvml {

// The unit behind a handle of an initialised library; none when NVML is not initialised or the
// handle names no present device. Lost devices answer too (their events are still theirs).
std::optional<int> UnitOf(nvmlDevice_st* device);
nvmlDevice_st* HandleOf(int unit);
// The GPU's XID word (SimDevice::xid) of a whole-GPU unit; false when NVML is not initialised.
bool XidWord(int unit, uint32_t* word);
// Runs `body(state, unit)` for a valid device of an initialised library, under the library's lock,
// as the library's own entry points run: its NVML result, else NVML_ERROR_UNINITIALIZED or
// NVML_ERROR_INVALID_ARGUMENT (as ints: this header leaves nvml.h out).
int WithUnit(nvmlDevice_st* device, const std::function<int(SimState& state, int unit)>& body);

}  // namespace gpuslice::sim::nvml
