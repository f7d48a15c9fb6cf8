// Every GPUSLICE_* option the shim reads, declared once (shim/options.cc): each declaration
// carries the name, the documented type, default and meaning, an example, and the function that
// parses and validates a value into ShimOptions. The parser, its error lines, `gpuslicectl
// options` and docs/configuration.md's environment reference all come from that one list. Read once, at
// the first CUDA call (shim/process_options.cc).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "broker/compute_class.h"
#include "broker/memory_share.h"
#include "common/status.h"

namespace gpuslice::shim {

struct ShimOptions;

struct OptionSpec {
  const char* name;      // a trailing "_<n>" means "per device ordinal n"
  const char* type;      // what a valid value is, as the docs and the error line say it
  const char* fallback;  // the default, as the docs show it
  const char* meaning;
  const char* example;  // a valid value, quoted in error messages
  // Stores `value` into *out; false when it is not valid. `ordinal` is the n of a per-ordinal
  // option, else -1.
  bool (*apply)(int ordinal, std::string_view value, ShimOptions* out);
};

// The declarations, in documentation order.
const std::vector<OptionSpec>& OptionTable();

// A memory limit: bytes, or a percentage of the device's memory.
struct MemoryLimit {
  uint64_t bytes = 0;
  uint32_t percent = 0;  // 1..100 when given as a percentage, else 0
  // The quota on a device of `device_total` bytes.
  uint64_t QuotaFor(uint64_t device_total) const;
};

// GPUSLICE_COMPUTE_CLASS: how the compute scheduler treats the tenant's launches (latency: they
// go first, held to its request when others want the GPU; standard: weighted fair sharing by
// request and limit; background: only GPU time no other tenant wants). The broker's type, so that
// the value the shim parses is the value the state file stores.
using broker::ComputeClass;
using broker::ComputeClassName;

struct ShimOptions {
  std::optional<MemoryLimit> memory_limit;                // GPUSLICE_MEMORY_LIMIT
  std::map<int, MemoryLimit> memory_limit_per_ordinal;    // GPUSLICE_MEMORY_LIMIT_<n>
  std::optional<MemoryLimit> memory_request;              // GPUSLICE_MEMORY_REQUEST
  std::map<int, MemoryLimit> memory_request_per_ordinal;  // GPUSLICE_MEMORY_REQUEST_<n>
  std::string tenant;                                     // GPUSLICE_TENANT ("" = the process alone)
  std::string state_dir = "/run/gpuslice";                // GPUSLICE_STATE_DIR
  std::string driver_library;                             // GPUSLICE_DRIVER_LIBRARY ("" = loader search)
  uint32_t compute_request_pct = 0;                       // GPUSLICE_COMPUTE_REQUEST (0 = default weight)
  uint32_t compute_limit_pct = 100;                       // GPUSLICE_COMPUTE_LIMIT
  ComputeClass compute_class = ComputeClass::kStandard;   // GPUSLICE_COMPUTE_CLASS

  // The limit given for device ordinal n (GPUSLICE_MEMORY_LIMIT_<n>, else GPUSLICE_MEMORY_LIMIT), if any.
  std::optional<MemoryLimit> LimitFor(int ordinal) const;
  // The request for device ordinal n (GPUSLICE_MEMORY_REQUEST_<n>, else GPUSLICE_MEMORY_REQUEST), if any.
  std::optional<MemoryLimit> RequestFor(int ordinal) const;
  // The ceiling on device ordinal n: its limit, else its request (a request alone is also the
  // limit), else none.
  std::optional<MemoryLimit> CeilingFor(int ordinal) const;
  // The tenant's share of device ordinal n (-1: a GPU seen through NVML alone, where only the
  // variables without an ordinal apply) of `device_total` bytes; an InvalidArgument error with
  // one line naming the variables when the request exceeds the limit there.
  Result<broker::MemoryShare> ShareFor(int ordinal, uint64_t device_total) const;
};

// Parses the environment. On any bad or unknown variable meant for gpuslice (GpusliceSpelling),
// an InvalidArgument error with one line naming the (first such) variable, its value and a valid
// example or the option it likely meant.
Result<ShimOptions> ParseOptions(char** environment);

// The options of the GPUSLICE_* variables that are valid, the others left out: what the driver's
// loader reads after ParseOptions refused (the shim fails closed, but GPUSLICE_DRIVER_LIBRARY,
// when valid, still names the driver that cuGetProcAddress answers from).
ShimOptions ValidOptions(char** environment);

// The rule for names meant for gpuslice (shim/near_miss_names.cc): the name upper-cased, with
// GPU_SLICE_ read as GPUSLICE_, when that begins GPUSLICE_ (the variable is then gpuslice's and
// must be spelt exactly as a declared option); nullopt for any other program's variable.
std::optional<std::string> GpusliceSpelling(std::string_view name);
// GPUSLICE_SIM_*, spelt so: the simulated driver's, not the shim's.
bool IsSimulatorVariable(std::string_view name);
// The option a variable of that spelling most likely meant: itself when it is one (per-device
// ones included), else the nearest within 3 edits, else "".
std::string LikelyOption(const std::string& spelling);

// The declared option a misspelt GPUSLICE_* name most likely meant (at most 3 edits), or "".
std::string SuggestOption(std::string_view name);

// Parses one limit ("512Mi", "4Gi", "4G", "1048576", "25%").
std::optional<MemoryLimit> ParseMemoryLimit(std::string_view text);

// This process's options, parsed from the environment at the first call and kept: the driver's
// loader (GPUSLICE_DRIVER_LIBRARY) and the shim's state read the same parse, so a bad variable
// is reported (once, on stderr) whether or not a driver can be loaded. *valid is false after
// such a report; the options are then ValidOptions'.
const ShimOptions& ProcessOptions(bool* valid);

}  // namespace gpuslice::shim
