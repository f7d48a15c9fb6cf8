#include "shim/device_warnings.h"

#include <cstdio>

#include "broker/memory_share.h"
#include "broker/unaccounted.h"

namespace gpuslice::shim {

std::string ShimBytes(uint64_t bytes) {
  constexpr uint64_t kMi = 1ULL << 20, kGi = 1ULL << 30;
  char text[48];
  if (bytes >= kGi && bytes % kGi == 0)
    std::snprintf(text, sizeof text, "%llu GiB", static_cast<unsigned long long>(bytes / kGi));
  else if (bytes >= kGi) std::snprintf(text, sizeof text, "%.2f GiB", static_cast<double>(bytes) / kGi);
  else if (bytes >= kMi) std::snprintf(text, sizeof text, "%llu MiB", static_cast<unsigned long long>(bytes / kMi));
  else std::snprintf(text, sizeof text, "%llu bytes", static_cast<unsigned long long>(bytes));
  return text;
}

std::string OversizedQuotaWarning(const ShimOptions& options, int ordinal, uint64_t device_total,
                                  const std::string& gpu_uuid) {
  const auto limit = ordinal >= 0 ? options.LimitFor(ordinal) : options.memory_limit;
  if (!limit || limit->percent != 0 || limit->bytes <= device_total) return "";
  const bool own = ordinal >= 0 && options.memory_limit_per_ordinal.count(ordinal) != 0;
  const std::string variable = own ? "GPUSLICE_MEMORY_LIMIT_" + std::to_string(ordinal) : "GPUSLICE_MEMORY_LIMIT";
  return "gpuslice: warning: " + variable + " (" + ShimBytes(limit->bytes) + ") is larger than " + gpu_uuid + "'s " +
         ShimBytes(device_total) +
         ": the quota never binds and this tenant may take the whole device; give a quantity up to the "
         "device's memory or a percentage, e.g. " +
         variable + "=50%";
}

std::string UnaccountedMemoryWarning(const DeviceMemorySeen& seen) {
  const uint64_t used = seen.device_total > seen.device_free ? seen.device_total - seen.device_free : 0;
  if (!broker::HeldElsewhere(used, seen.accounted, seen.processes)) return "";
  const uint64_t may_take = seen.tenant_quota == broker::kUnlimited ? seen.device_total : seen.tenant_quota;
  const uint64_t left = may_take > seen.tenant_used ? may_take - seen.tenant_used : 0;
  if (seen.device_free >= left) return "";  // everything the tenant may take is there
  const std::string tenant = seen.tenant.empty() ? "this process's tenant" : "tenant " + seen.tenant;
  return "gpuslice: warning: " + seen.gpu_uuid + " has " + ShimBytes(seen.device_free) + " free, less than the " +
         ShimBytes(left) + " " + tenant + " may still take: " + ShimBytes(used) + " of its " +
         ShimBytes(seen.device_total) + " is in use and " + ShimBytes(seen.accounted) + " of that is accounted in " +
         seen.state_dir + "; the other " + ShimBytes(broker::UnaccountedBytes(used, seen.accounted)) +
         " is held by processes of another state directory or not under gpuslice, and allocations within the "
         "quota may fail: check that every container of the node mounts the same host directory at "
         "GPUSLICE_STATE_DIR (docs/accounting.md, \"Unaccounted memory\")";
}

}  // namespace gpuslice::shim
