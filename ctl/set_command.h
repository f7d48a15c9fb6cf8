// `gpuslicectl set`: an operator's per-GPU compute policy — the sharing mode and the quantum —
// written into the broker's segment, where every tenant's shim reads it at its next gate.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace gpuslice::ctl {

struct SetOptions {
  std::optional<std::string> gpu;      // a UUID as `gpuslicectl status` prints it, or "all"
  std::optional<std::string> quantum;  // a duration (10ms, 500us, 0.05s) or "default"; empty: unchanged
  std::optional<std::string> mode;     // timeslice | none | mps; empty: unchanged
  std::optional<std::string> budget;   // a duration or "default": work a holder may keep queued
  std::string state_dir;               // "" = DefaultStateDir()
};

// The range a quantum must lie in: shorter ones spend the GPU on hand-overs (each drains the
// holder's kernels), longer ones make a waiting tenant's latency a second or more.
inline constexpr uint64_t kMinQuantumNs = 1'000'000;
inline constexpr uint64_t kMaxQuantumNs = 1'000'000'000;
// The range a budget must lie in: at least one kernel is always let through, so a tiny budget
// means "one kernel at a time"; a budget beyond a quantum would let a holder queue a backlog.
inline constexpr uint64_t kMinBudgetNs = 100'000;
inline constexpr uint64_t kMaxBudgetNs = 100'000'000;

// Validates the options (exit 2 and one line on stderr for a usage error), then writes the policy
// of the chosen GPUs and prints one line per GPU saying what changed (exit 1 and one line when
// the state cannot be changed: missing, incompatible, read-only, or no such GPU).
int RunSet(const SetOptions& options);

}  // namespace gpuslice::ctl
