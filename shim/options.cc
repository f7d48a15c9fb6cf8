#include "shim/options.h"

#include <algorithm>
#include <cstring>

#include "common/quantity.h"

namespace gpuslice::shim {
namespace {

constexpr std::string_view kPrefix = "GPUSLICE_";
// Variables of the simulated driver share the prefix but are not the shim's.
constexpr std::string_view kSimulatorPrefix = "GPUSLICE_SIM_";
constexpr std::string_view kPerOrdinalLimit = "GPUSLICE_MEMORY_LIMIT_";

bool ValidTenant(std::string_view name) {
  if (name.empty() || name.size() > 63) return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                    c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

bool Fail(std::string* error, std::string_view name, std::string_view value, const char* expected) {
  *error = "gpuslice: invalid " + std::string(name) + "='" + std::string(value) + "'; expected " + expected;
  return false;
}

size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// The option a misspelt name most likely meant, or "".
std::string Suggestion(std::string_view name) {
  std::string best;
  size_t best_distance = 4;  // more edits than this is not a typo
  for (const auto& spec : OptionTable()) {
    const size_t d = EditDistance(name, spec.name);
    if (d < best_distance) {
      best_distance = d;
      best = spec.name;
    }
  }
  return best;
}

const OptionSpec* Spec(std::string_view name) {
  for (const auto& spec : OptionTable()) {
    if (name == spec.name) return &spec;
  }
  return nullptr;
}

std::string Expected(const char* name) {
  const OptionSpec* spec = Spec(name);
  return std::string(spec->type) + ", e.g. " + spec->example;
}

}  // namespace

const std::vector<OptionSpec>& OptionTable() {
  static const std::vector<OptionSpec> kTable = {
      {"GPUSLICE_MEMORY_LIMIT", "quantity or percentage", "unlimited",
       "The tenant's GPU memory quota on each GPU it uses: 512Mi, 4Gi, 4G, plain bytes, or a percentage "
       "of the device such as 25%. Allocations beyond it fail with CUDA_ERROR_OUT_OF_MEMORY.",
       "4Gi"},
      {"GPUSLICE_MEMORY_LIMIT_<n>", "quantity or percentage", "GPUSLICE_MEMORY_LIMIT",
       "Overrides GPUSLICE_MEMORY_LIMIT for the process's device ordinal n (as this process numbers "
       "its devices).",
       "GPUSLICE_MEMORY_LIMIT_1=2Gi"},
      {"GPUSLICE_TENANT", "name", "the process alone",
       "The tenant: every process with the same name shares one quota per physical GPU. 1 to 63 of "
       "A-Z a-z 0-9 . _ -",
       "team-a.inference"},
      {"GPUSLICE_STATE_DIR", "absolute directory", "/run/gpuslice",
       "Where the broker's shared segment lives; mount the same host directory into every container "
       "of the node.",
       "/run/gpuslice"},
      {"GPUSLICE_COMPUTE_REQUEST", "percentage 1-100", "10",
       "The share of each GPU's time the tenant is entitled to when it wants it, and its weight "
       "among the tenants waiting for the GPU (requests over 100% in total are shared in proportion).",
       "30"},
      {"GPUSLICE_COMPUTE_LIMIT", "percentage 1-100", "100",
       "The share of each GPU's time the tenant may never exceed, even when the GPU is otherwise idle; "
       "100 lets it use any idle time.",
       "50"},
      {"GPUSLICE_DRIVER_LIBRARY", "absolute path", "found as the dynamic loader finds libcuda.so.1",
       "The real CUDA driver library, when it is not where the loader looks.",
       "/usr/lib/x86_64-linux-gnu/libcuda.so.1"},
  };
  return kTable;
}

uint64_t MemoryLimit::QuotaFor(uint64_t device_total) const {
  if (percent == 0) return bytes;
  return static_cast<uint64_t>((static_cast<unsigned __int128>(device_total) * percent) / 100);
}

std::optional<MemoryLimit> ParseMemoryLimit(std::string_view text) {
  MemoryLimit limit;
  if (!text.empty() && text.back() == '%') {
    const auto percent = ParseUnsigned(text.substr(0, text.size() - 1));
    if (!percent || *percent < 1 || *percent > 100) return std::nullopt;
    limit.percent = static_cast<uint32_t>(*percent);
    return limit;
  }
  const auto bytes = ParseByteQuantity(text);
  if (!bytes || *bytes == 0) return std::nullopt;
  limit.bytes = *bytes;
  return limit;
}

std::optional<MemoryLimit> ShimOptions::LimitFor(int ordinal) const {
  if (auto it = memory_limit_per_ordinal.find(ordinal); it != memory_limit_per_ordinal.end()) return it->second;
  return memory_limit;
}

bool ParseOptions(char** environment, ShimOptions* out, std::string* error) {
  ShimOptions options;
  for (char** entry = environment; entry && *entry; ++entry) {
    const std::string_view item(*entry);
    if (!item.starts_with(kPrefix) || item.starts_with(kSimulatorPrefix)) continue;
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos) continue;
    const std::string_view name = item.substr(0, eq);
    const std::string_view value = item.substr(eq + 1);
    if (name == "GPUSLICE_MEMORY_LIMIT") {
      options.memory_limit = ParseMemoryLimit(value);
      if (!options.memory_limit)
        return Fail(error, name, value, "a quantity above 0 (512Mi, 4Gi, 4G, bytes) or a percentage 1% to 100%, e.g. 4Gi");
    } else if (name.starts_with(kPerOrdinalLimit)) {
      const auto ordinal = ParseUnsigned(name.substr(kPerOrdinalLimit.size()));
      if (!ordinal || *ordinal > 63) {
        *error = "gpuslice: unknown variable " + std::string(name) + "='" + std::string(value) +
                 "'; per-device limits are GPUSLICE_MEMORY_LIMIT_<n> with n a device ordinal 0 to 63, e.g. "
                 "GPUSLICE_MEMORY_LIMIT_1=2Gi";
        return false;
      }
      const auto limit = ParseMemoryLimit(value);
      if (!limit)
        return Fail(error, name, value, "a quantity above 0 (512Mi, 4Gi, 4G, bytes) or a percentage 1% to 100%, e.g. 2Gi");
      options.memory_limit_per_ordinal[static_cast<int>(*ordinal)] = *limit;
    } else if (name == "GPUSLICE_TENANT") {
      if (!ValidTenant(value)) return Fail(error, name, value, Expected("GPUSLICE_TENANT").c_str());
      options.tenant = value;
    } else if (name == "GPUSLICE_STATE_DIR") {
      if (value.empty() || value[0] != '/') return Fail(error, name, value, Expected("GPUSLICE_STATE_DIR").c_str());
      options.state_dir = value;
    } else if (name == "GPUSLICE_COMPUTE_REQUEST" || name == "GPUSLICE_COMPUTE_LIMIT") {
      const auto percent = ParseUnsigned(value.ends_with("%") ? value.substr(0, value.size() - 1) : value);
      if (!percent || *percent < 1 || *percent > 100)
        return Fail(error, name, value, "a percentage from 1 to 100, e.g. 30");
      (name == "GPUSLICE_COMPUTE_REQUEST" ? options.compute_request_pct : options.compute_limit_pct) =
          static_cast<uint32_t>(*percent);
    } else if (name == "GPUSLICE_DRIVER_LIBRARY") {
      if (value.empty() || value[0] != '/')
        return Fail(error, name, value, Expected("GPUSLICE_DRIVER_LIBRARY").c_str());
      options.driver_library = value;
    } else {
      // A misspelt limit must not silently mean "unlimited".
      const std::string suggestion = Suggestion(name);
      std::string known;
      for (const auto& spec : OptionTable()) known += (known.empty() ? "" : ", ") + std::string(spec.name);
      *error = "gpuslice: unknown variable " + std::string(name) + "='" + std::string(value) + "'; " +
               (suggestion.empty() ? "" : "did you mean " + suggestion + "? ") + "gpuslice reads " + known +
               ", e.g. GPUSLICE_MEMORY_LIMIT=4Gi";
      return false;
    }
  }
  if (options.compute_request_pct > options.compute_limit_pct) {
    *error = "gpuslice: invalid GPUSLICE_COMPUTE_REQUEST='" + std::to_string(options.compute_request_pct) +
             "' above GPUSLICE_COMPUTE_LIMIT='" + std::to_string(options.compute_limit_pct) +
             "'; the request must not exceed the limit, e.g. GPUSLICE_COMPUTE_REQUEST=30 GPUSLICE_COMPUTE_LIMIT=50";
    return false;
  }
  *out = std::move(options);
  return true;
}

}  // namespace gpuslice::shim
