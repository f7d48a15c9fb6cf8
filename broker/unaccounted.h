// Memory the device has in use that the tenants of one state directory do not account for: held
// by processes of another state directory (a container whose mount of GPUSLICE_STATE_DIR was
// forgotten: its tenants' quotas are counted apart, and the GPU fills up under everyone's quota)
// or by processes not under gpuslice. The shim warns of it once per GPU, `gpuslicectl status`
// and the exporter show it (docs/accounting.md, "Unaccounted memory").
#pragma once

#include <cstdint>

namespace gpuslice::broker {

// Driver-internal memory (each process's context and modules: hundreds of MiB on a real GPU) is
// never charged to a tenant, so a difference up to this much is taken for it; only a larger one
// is reported as memory held elsewhere. The figure itself is always shown.
inline constexpr uint64_t kUnaccountedAllowance = 1ULL << 30;

// Device memory in use beyond what is accounted; 0 when the accounted total is as large.
inline uint64_t UnaccountedBytes(uint64_t device_used, uint64_t accounted) {
  return device_used > accounted ? device_used - accounted : 0;
}

// Whether that difference is more than driver-internal memory explains.
inline bool HeldElsewhere(uint64_t device_used, uint64_t accounted) {
  return UnaccountedBytes(device_used, accounted) > kUnaccountedAllowance;
}

}  // namespace gpuslice::broker
