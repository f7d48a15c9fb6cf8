// A tenant's compute class, as GPUSLICE_COMPUTE_CLASS names it and as the state file stores it
// (LedgerEntry::compute_class): the one definition the shim, the broker, gpuslicectl and the
// exporter share, so that a value and its name can never mean different things in two places.
#pragma once

#include <cstdint>
#include <optional>

namespace gpuslice::broker {

enum class ComputeClass : uint32_t {
  kStandard = 0,    // weighted fair sharing by request and limit
  kLatency = 1,     // launches pass the grant while within its request; others' queues are cut
  kBackground = 2,  // granted only when no standard or latency tenant waits
};

// "standard", "latency", "background".
inline const char* ComputeClassName(ComputeClass compute_class) {
  switch (compute_class) {
    case ComputeClass::kLatency: return "latency";
    case ComputeClass::kBackground: return "background";
    case ComputeClass::kStandard: break;
  }
  return "standard";
}

// The class a stored value names; nullopt for a value no build wrote (a corrupt or newer file).
inline std::optional<ComputeClass> ComputeClassFromStored(uint32_t stored) {
  if (stored > static_cast<uint32_t>(ComputeClass::kBackground)) return std::nullopt;
  return static_cast<ComputeClass>(stored);
}

}  // namespace gpuslice::broker
