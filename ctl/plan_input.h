// `gpuslicectl plan`'s input: the tenants to place, read from a YAML or JSON file (JSON is
// YAML). Every field is checked here, so the planner only ever sees valid tenants; the first bad
// one is reported in one line naming the file, the tenant and what would be valid.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace gpuslice::ctl {

struct PlanTenant {
  std::string name;                  // becomes GPUSLICE_TENANT: 1-63 of A-Z a-z 0-9 . _ -
  uint64_t memory_bytes = 0;         // GPU memory it needs: its request, what the plan packs
  uint64_t memory_limit_bytes = 0;   // what it may borrow up to beyond it; 0: its request
  uint32_t compute_percent = 0;      // share of one whole GPU's compute (its SMs), 1-100
  std::optional<double> latency_ms;  // p99 latency target of its GPU work, if it has one
  bool trusted = false;              // false (the default): it may be hostile, or badly behaved
  bool fault_tolerant = false;       // true: another tenant's GPU fault may break it too
  std::string tier = "default";      // tenants of different tiers never share a GPU

  // Needs hardware isolation: memory, SMs and faults of its own (a MIG instance).
  bool NeedsIsolation() const { return !trusted || !fault_tolerant; }
};

// Reads `path`. An error of one line (prefixed with the path) when the file cannot be read, is
// not YAML/JSON of the documented shape, or a tenant's field is missing or invalid.
Result<std::vector<PlanTenant>> ReadPlanTenants(const std::string& path);

// The same from text (for tests and the reader above); `source` names it in errors.
Result<std::vector<PlanTenant>> ParsePlanTenants(const std::string& text, const std::string& source);

}  // namespace gpuslice::ctl
