#include "shim/options.h"

#include <algorithm>
#include <cstring>

#include "common/edit_distance.h"
#include "common/quantity.h"

namespace gpuslice::shim {
namespace {

// A declaration's name ending in this is one variable per device ordinal.
constexpr std::string_view kOrdinalSuffix = "<n>";
constexpr uint64_t kMaxOrdinal = 63;

bool ValidTenant(std::string_view name) {
  if (name.empty() || name.size() > 63) return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                    c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

bool AbsolutePath(std::string_view value) { return !value.empty() && value[0] == '/'; }

std::optional<uint32_t> ParsePercent(std::string_view value) {
  const auto percent = ParseUnsigned(value.ends_with("%") ? value.substr(0, value.size() - 1) : value);
  if (!percent || *percent < 1 || *percent > 100) return std::nullopt;
  return static_cast<uint32_t>(*percent);
}

// ---- How each option's value is parsed and stored (the `apply` of its declaration). ----

bool ApplyMemoryLimit(int, std::string_view value, ShimOptions* out) {
  out->memory_limit = ParseMemoryLimit(value);
  return out->memory_limit.has_value();
}

bool ApplyMemoryLimitForOrdinal(int ordinal, std::string_view value, ShimOptions* out) {
  const auto limit = ParseMemoryLimit(value);
  if (!limit) return false;
  out->memory_limit_per_ordinal[ordinal] = *limit;
  return true;
}

bool ApplyMemoryRequest(int, std::string_view value, ShimOptions* out) {
  out->memory_request = ParseMemoryLimit(value);
  return out->memory_request.has_value();
}

bool ApplyMemoryRequestForOrdinal(int ordinal, std::string_view value, ShimOptions* out) {
  const auto request = ParseMemoryLimit(value);
  if (!request) return false;
  out->memory_request_per_ordinal[ordinal] = *request;
  return true;
}

bool ApplyTenant(int, std::string_view value, ShimOptions* out) {
  if (!ValidTenant(value)) return false;
  out->tenant = value;
  return true;
}

bool ApplyStateDir(int, std::string_view value, ShimOptions* out) {
  if (!AbsolutePath(value)) return false;
  out->state_dir = value;
  return true;
}

bool ApplyComputeRequest(int, std::string_view value, ShimOptions* out) {
  const auto percent = ParsePercent(value);
  if (percent) out->compute_request_pct = *percent;
  return percent.has_value();
}

bool ApplyComputeLimit(int, std::string_view value, ShimOptions* out) {
  const auto percent = ParsePercent(value);
  if (percent) out->compute_limit_pct = *percent;
  return percent.has_value();
}

bool ApplyComputeClass(int, std::string_view value, ShimOptions* out) {
  for (ComputeClass c : {ComputeClass::kLatency, ComputeClass::kStandard, ComputeClass::kBackground}) {
    if (value == ComputeClassName(c)) {
      out->compute_class = c;
      return true;
    }
  }
  return false;
}

bool ApplyDriverLibrary(int, std::string_view value, ShimOptions* out) {
  if (!AbsolutePath(value)) return false;
  out->driver_library = value;
  return true;
}

// ---- Matching names and reporting errors. ----

bool PerOrdinal(const OptionSpec& spec) { return std::string_view(spec.name).ends_with(kOrdinalSuffix); }

// "GPUSLICE_MEMORY_LIMIT_" for "GPUSLICE_MEMORY_LIMIT_<n>".
std::string_view OrdinalPrefix(const OptionSpec& spec) {
  const std::string_view name(spec.name);
  return name.substr(0, name.size() - kOrdinalSuffix.size());
}

std::string Assignment(std::string_view name, std::string_view value) {
  return std::string(name) + "='" + std::string(value) + "'";
}

}  // namespace

std::string SuggestOption(std::string_view name) {
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

namespace {

std::string UnknownVariable(std::string_view name, std::string_view value) {
  // A misspelt limit must not silently mean "unlimited" (shim/near_miss_names.cc).
  const std::string suggestion = LikelyOption(GpusliceSpelling(name).value_or(std::string(name)));
  std::string known;
  for (const auto& spec : OptionTable()) known += (known.empty() ? "" : ", ") + std::string(spec.name);
  return "gpuslice: unknown variable " + Assignment(name, value) + "; " +
         (suggestion.empty() ? "" : "did you mean " + suggestion + "? ") + "gpuslice reads " + known +
         ", e.g. GPUSLICE_MEMORY_LIMIT=4Gi";
}

// Applies one GPUSLICE_* variable; an error with its line when it is unknown or invalid.
Status ApplyVariable(std::string_view name, std::string_view value, ShimOptions* out) {
  for (const auto& spec : OptionTable()) {
    int ordinal = -1;
    if (PerOrdinal(spec)) {
      const std::string_view prefix = OrdinalPrefix(spec);
      if (!name.starts_with(prefix)) continue;
      const auto n = ParseUnsigned(name.substr(prefix.size()));
      if (!n || *n > kMaxOrdinal) {
        return Status::InvalidArgument("gpuslice: unknown variable " + Assignment(name, value) +
                                       "; per-device variables are " + spec.name + " with n a device ordinal 0 to " +
                                       std::to_string(kMaxOrdinal) + ", e.g. " + std::string(prefix) +
                                       "1=" + spec.example);
      }
      ordinal = static_cast<int>(*n);
    } else if (name != spec.name) {
      continue;
    }
    if (spec.apply(ordinal, value, out)) return Status::Ok();
    return Status::InvalidArgument("gpuslice: invalid " + Assignment(name, value) + "; expected " + spec.type +
                                   ", e.g. " + spec.example);
  }
  return Status::InvalidArgument(UnknownVariable(name, value));
}

// Applies every variable meant for gpuslice (GpusliceSpelling) of `environment` that is valid to
// *out; the first error. One spelt otherwise than exactly as an option is unknown, however near.
Status ApplyEnvironment(char** environment, ShimOptions* out) {
  Status first_error;
  for (char** entry = environment; entry && *entry; ++entry) {
    const std::string_view item(*entry);
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos) continue;
    const std::string_view name = item.substr(0, eq), value = item.substr(eq + 1);
    const std::optional<std::string> spelling = GpusliceSpelling(name);
    if (!spelling || IsSimulatorVariable(name)) continue;
    Status applied = *spelling == name ? ApplyVariable(name, value, out)
                                       : Status::InvalidArgument(UnknownVariable(name, value));
    if (!applied.ok() && first_error.ok()) first_error = std::move(applied);
  }
  return first_error;
}

}  // namespace

const std::vector<OptionSpec>& OptionTable() {
  // Exact names are matched before per-ordinal prefixes: GPUSLICE_MEMORY_LIMIT comes first.
  static const std::vector<OptionSpec> kTable = {
      {"GPUSLICE_MEMORY_LIMIT", "quantity above 0 or percentage 1% to 100%", "GPUSLICE_MEMORY_REQUEST, else unlimited",
       "The tenant's GPU memory ceiling (its quota) on each GPU it uses: 512Mi, 4Gi (Ki, Mi, Gi, Ti, Pi, Ei: powers "
       "of 1024), 4G (k, M, G, T, P, E: powers of 1000, so 4G is 4000000000 bytes, 3.73 GiB), 1.5Gi, 4e9, plain "
       "bytes (any Kubernetes quantity of whole bytes), or a percentage of the device such as 25%. Allocations "
       "beyond it fail with CUDA_ERROR_OUT_OF_MEMORY.",
       "4Gi", ApplyMemoryLimit},
      {"GPUSLICE_MEMORY_LIMIT_<n>", "quantity above 0 or percentage 1% to 100%", "GPUSLICE_MEMORY_LIMIT",
       "Overrides GPUSLICE_MEMORY_LIMIT for the process's device ordinal n (0 to 63, as this process "
       "numbers its devices).",
       "2Gi", ApplyMemoryLimitForOrdinal},
      {"GPUSLICE_MEMORY_REQUEST", "quantity above 0 or percentage 1% to 100%", "none",
       "The GPU memory guaranteed to the tenant on each GPU it uses, whatever other tenants do (same forms as "
       "GPUSLICE_MEMORY_LIMIT, at most the limit). Above it, up to the limit, the tenant borrows only memory no "
       "other tenant's request reserves. The requests on a GPU together may not exceed its memory.",
       "2Gi", ApplyMemoryRequest},
      {"GPUSLICE_MEMORY_REQUEST_<n>", "quantity above 0 or percentage 1% to 100%", "GPUSLICE_MEMORY_REQUEST",
       "Overrides GPUSLICE_MEMORY_REQUEST for the process's device ordinal n (0 to 63).", "1Gi",
       ApplyMemoryRequestForOrdinal},
      {"GPUSLICE_TENANT", "name of 1 to 63 of A-Z a-z 0-9 . _ -", "the process alone",
       "The tenant: every process with the same name shares one quota per physical GPU.", "team-a.inference",
       ApplyTenant},
      {"GPUSLICE_STATE_DIR", "absolute directory", "/run/gpuslice",
       "Where the broker's shared segment lives; mount the same host directory into every container "
       "of the node.",
       "/run/gpuslice", ApplyStateDir},
      {"GPUSLICE_COMPUTE_REQUEST", "percentage 1-100", "10",
       "The share of each GPU's time the tenant is entitled to when it wants it, and its weight "
       "among the tenants waiting for the GPU (requests over 100% in total are shared in proportion).",
       "30", ApplyComputeRequest},
      {"GPUSLICE_COMPUTE_LIMIT", "percentage 1-100", "100",
       "The share of each GPU's time the tenant may never exceed, even when the GPU is otherwise idle; "
       "100 lets it use any idle time.",
       "50", ApplyComputeLimit},
      {"GPUSLICE_COMPUTE_CLASS", "latency, standard or background", "standard",
       "The tenant's compute class: latency (its launches go first, held to its request when others "
       "want the GPU), standard (weighted fair sharing by request and limit) or background (runs only "
       "on GPU time no other tenant wants).",
       "latency", ApplyComputeClass},
      {"GPUSLICE_DRIVER_LIBRARY", "absolute path", "found as the dynamic loader finds libcuda.so.1",
       "The real CUDA driver library, when it is not where the loader looks.", "/usr/lib/x86_64-linux-gnu/libcuda.so.1",
       ApplyDriverLibrary},
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

std::optional<MemoryLimit> ShimOptions::RequestFor(int ordinal) const {
  if (auto it = memory_request_per_ordinal.find(ordinal); it != memory_request_per_ordinal.end()) return it->second;
  return memory_request;
}

std::optional<MemoryLimit> ShimOptions::CeilingFor(int ordinal) const {
  if (auto limit = LimitFor(ordinal)) return limit;
  return RequestFor(ordinal);
}

namespace {

// "GPUSLICE_MEMORY_LIMIT_1" when ordinal n has its own value, else the variable without one.
std::string VariableFor(const char* name, const std::map<int, MemoryLimit>& per_ordinal, int ordinal) {
  return per_ordinal.count(ordinal) ? std::string(name) + "_" + std::to_string(ordinal) : std::string(name);
}

std::string BytesText(uint64_t bytes) {
  if (bytes % (1ULL << 30) == 0) return std::to_string(bytes >> 30) + "Gi";
  if (bytes % (1ULL << 20) == 0) return std::to_string(bytes >> 20) + "Mi";
  return std::to_string(bytes);
}

std::string LimitText(const MemoryLimit& value) {
  return value.percent ? std::to_string(value.percent) + "%" : BytesText(value.bytes);
}

}  // namespace

Result<broker::MemoryShare> ShimOptions::ShareFor(int ordinal, uint64_t device_total) const {
  const auto request = ordinal >= 0 ? RequestFor(ordinal) : memory_request;
  const auto limit = ordinal >= 0 ? LimitFor(ordinal) : memory_limit;
  broker::MemoryShare share;
  if (request) share.request = request->QuotaFor(device_total);
  share.limit = limit ? limit->QuotaFor(device_total) : request ? share.request : broker::kUnlimited;
  if (share.request > share.limit) {
    const std::string request_name = VariableFor("GPUSLICE_MEMORY_REQUEST", memory_request_per_ordinal, ordinal);
    const std::string limit_name = VariableFor("GPUSLICE_MEMORY_LIMIT", memory_limit_per_ordinal, ordinal);
    return Status::InvalidArgument(
        "gpuslice: invalid " + request_name + "='" + LimitText(*request) + "' above " + limit_name + "='" +
        LimitText(*limit) + "'" +
        ((request->percent != 0) != (limit->percent != 0) ? " on a device of " + BytesText(device_total)
                                                          : std::string()) +
        "; the request must not exceed the limit, e.g. " + request_name + "=2Gi " + limit_name + "=4Gi");
  }
  return share;
}

Result<ShimOptions> ParseOptions(char** environment) {
  ShimOptions options;
  if (Status applied = ApplyEnvironment(environment, &options); !applied.ok()) return applied;
  // The rules between two options. A memory request and limit of different kinds (bytes and a
  // percentage) are compared on each device (ShareFor).
  for (int ordinal = -1; ordinal <= static_cast<int>(kMaxOrdinal); ++ordinal) {
    const auto request = ordinal < 0 ? options.memory_request : options.RequestFor(ordinal);
    const auto limit = ordinal < 0 ? options.memory_limit : options.LimitFor(ordinal);
    if (!request || !limit || (request->percent != 0) != (limit->percent != 0)) continue;
    // Of one kind, they compare on any device: a device of 100 bytes compares percentages.
    if (Result<broker::MemoryShare> share = options.ShareFor(ordinal, 100); !share.ok()) return share.status();
  }
  if (options.compute_request_pct > options.compute_limit_pct) {
    return Status::InvalidArgument(
        "gpuslice: invalid GPUSLICE_COMPUTE_REQUEST='" + std::to_string(options.compute_request_pct) +
        "' above GPUSLICE_COMPUTE_LIMIT='" + std::to_string(options.compute_limit_pct) +
        "'; the request must not exceed the limit, e.g. GPUSLICE_COMPUTE_REQUEST=30 GPUSLICE_COMPUTE_LIMIT=50");
  }
  return options;
}

ShimOptions ValidOptions(char** environment) {
  ShimOptions options;
  (void)ApplyEnvironment(environment, &options);  // the errors are ParseOptions' to report
  return options;
}

}  // namespace gpuslice::shim
