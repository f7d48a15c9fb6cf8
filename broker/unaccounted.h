// Memory the device has in use that the tenants of one state directory do not account for: held
// by processes of another state directory (a container whose mount of GPUSLICE_STATE_DIR was
// forgotten: its tenants' quotas are counted apart, and the GPU fills up under everyone's quota)
// or by processes not under gpuslice. The shim warns of it once per GPU, `gpuslicectl status`
// and the exporter show it (docs/accounting.md, "Unaccounted memory").
#pragma once

#include <cstdint>

namespace gpuslice::broker {

// Driver-internal memory (each process's context and modules: a few hundred MiB per process on
// a real GPU) is never charged to a tenant, so a difference up to 512 MiB per process on the
// device, and at least 1 GiB, is taken for it; only a larger one is reported as memory held
// elsewhere. The figure itself is always shown.
inline constexpr uint64_t kContextAllowance = 512ULL << 20;
inline constexpr uint64_t kMinimumAllowance = 1ULL << 30;

inline uint64_t DriverAllowance(uint64_t processes) {
  return processes * kContextAllowance > kMinimumAllowance ? processes * kContextAllowance : kMinimumAllowance;
}

// Device memory in use beyond what is accounted; 0 when the accounted total is as large.
inline uint64_t UnaccountedBytes(uint64_t device_used, uint64_t accounted) {
  return device_used > accounted ? device_used - accounted : 0;
}

// Whether that difference is more than the driver-internal memory of `processes` explains.
inline bool HeldElsewhere(uint64_t device_used, uint64_t accounted, uint64_t processes) {
  return UnaccountedBytes(device_used, accounted) > DriverAllowance(processes);
}

}  // namespace gpuslice::broker
