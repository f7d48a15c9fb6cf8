// A tenant's memory on one GPU: what it is guaranteed (its request) and what it may reach when
// the GPU has memory nobody's request reserves (its limit). docs/accounting.md, "Requests and
// limits", is the user's account of the rule (broker/memory_requests.h enforces it).
#pragma once

#include <cstdint>

namespace gpuslice::broker {

inline constexpr uint64_t kUnlimited = UINT64_MAX;

struct MemoryShare {
  uint64_t request = 0;         // bytes it may hold whatever other tenants do; 0: no guarantee
  uint64_t limit = kUnlimited;  // bytes it may never exceed; at least the request
  bool operator==(const MemoryShare&) const = default;
};

// Who told the node of a tenant's request before any process of the tenant ran
// (LedgerEntry::announced). The value says which daemon withdraws it.
enum class MemoryAnnouncer : uint32_t {
  kNone = 0,
  kDevicePlugin = 1,  // gpuslice-device-plugin's Allocate; withdrawn when the pod is gone
  kDraDriver = 2,     // gpuslice-dra-driver's NodePrepareResources; withdrawn at unprepare
};

}  // namespace gpuslice::broker
