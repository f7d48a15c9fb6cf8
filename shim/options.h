// Every GPUSLICE_* option the shim reads: one table (name, type, default, meaning) that the
// parser, the error messages, `gpuslicectl options` and the README's environment reference
// all come from. Read once, at the first CUDA call.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpuslice::shim {

struct OptionSpec {
  const char* name;     // a trailing "_<n>" means "per device ordinal n"
  const char* type;
  const char* fallback; // the default, as the docs show it
  const char* meaning;
  const char* example;  // a valid value, quoted in error messages
};

// The table, in documentation order.
const std::vector<OptionSpec>& OptionTable();

// A memory limit: bytes, or a percentage of the device's memory.
struct MemoryLimit {
  uint64_t bytes = 0;
  uint32_t percent = 0;  // 1..100 when given as a percentage, else 0
  // The quota on a device of `device_total` bytes.
  uint64_t QuotaFor(uint64_t device_total) const;
};

// GPUSLICE_COMPUTE_CLASS: how the compute scheduler treats the tenant's launches.
enum class ComputeClass : uint8_t {
  kLatency,     // its launches go first, held to its request when others want the GPU
  kStandard,    // weighted fair sharing by request and limit
  kBackground,  // runs only on GPU time no other tenant wants
};

struct ShimOptions {
  std::optional<MemoryLimit> memory_limit;              // GPUSLICE_MEMORY_LIMIT
  std::map<int, MemoryLimit> memory_limit_per_ordinal;  // GPUSLICE_MEMORY_LIMIT_<n>
  std::string tenant;                                   // GPUSLICE_TENANT ("" = the process alone)
  std::string state_dir = "/run/gpuslice";              // GPUSLICE_STATE_DIR
  std::string driver_library;                           // GPUSLICE_DRIVER_LIBRARY ("" = loader search)
  uint32_t compute_request_pct = 0;                     // GPUSLICE_COMPUTE_REQUEST (0 = default weight)
  uint32_t compute_limit_pct = 100;                     // GPUSLICE_COMPUTE_LIMIT
  ComputeClass compute_class = ComputeClass::kStandard;  // GPUSLICE_COMPUTE_CLASS

  // The limit for device ordinal n, if any.
  std::optional<MemoryLimit> LimitFor(int ordinal) const;
};

// Parses the environment. On any bad or unknown GPUSLICE_* variable returns false with one line
// in *error naming the variable, its value and a valid example.
bool ParseOptions(char** environment, ShimOptions* out, std::string* error);

// Parses one limit ("512Mi", "4Gi", "4G", "1048576", "25%").
std::optional<MemoryLimit> ParseMemoryLimit(std::string_view text);

}  // namespace gpuslice::shim
