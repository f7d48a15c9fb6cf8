#include "ctl/status_table.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "ctl/status_report.h"
#include "ctl/units.h"

namespace gpuslice::ctl {
namespace {

struct Row {
  std::string name;  // tenant name, or "  pid N" beneath its tenant
  std::string used;
  std::string quota;
  std::string percent;
};

std::string QuotaText(uint64_t quota) { return quota == broker::kUnlimited ? "unlimited" : FormatBytes(quota); }

std::string CommitmentLine(const broker::GpuView& gpu) {
  const Commitment c = CommitmentOf(gpu);
  std::string line = fmt::format("quota committed: {} of {} ({})", FormatBytes(c.quota_bytes),
                                 FormatBytes(gpu.total_memory), FormatPercent(c.quota_bytes, gpu.total_memory));
  if (c.unlimited_tenants > 0) {
    line += fmt::format(", plus {} tenant{} without a quota", c.unlimited_tenants, c.unlimited_tenants == 1 ? "" : "s");
  }
  if (c.idle_tenants > 0) {
    line += fmt::format("; {} idle tenant{} not counted", c.idle_tenants, c.idle_tenants == 1 ? "" : "s");
  }
  if (c.oversubscribed) {
    line += c.quota_bytes > gpu.total_memory
                ? " -- OVERSUBSCRIBED: the quotas exceed the device"
                : " -- OVERSUBSCRIBED: a tenant without a quota shares the device";
  }
  return line;
}

void AppendGpu(const broker::GpuView& gpu, std::string* out) {
  *out += fmt::format("GPU {}  {} total\n", gpu.uuid, FormatBytes(gpu.total_memory));
  if (gpu.tenants.empty()) {
    *out += "  no tenants\n";
  } else {
    std::vector<Row> rows;
    rows.push_back({"TENANT / PID", "USED", "QUOTA", "% QUOTA"});
    for (const auto& tenant : gpu.tenants) {
      rows.push_back({tenant.name, FormatBytes(tenant.used), QuotaText(tenant.quota),
                      tenant.quota == broker::kUnlimited ? "-" : FormatPercent(tenant.used, tenant.quota)});
      for (const auto& process : tenant.processes) {
        rows.push_back({fmt::format("  pid {}", process.pid), FormatBytes(process.charged), "", ""});
      }
    }
    // Tenant names run to 63 bytes: size the first column to the longest one present.
    size_t name_width = 0;
    for (const auto& row : rows) name_width = std::max(name_width, row.name.size());
    for (const auto& row : rows) {
      std::string line = fmt::format("  {:<{}}  {:>10}  {:>10}  {:>8}", row.name, name_width, row.used, row.quota,
                                     row.percent);
      line.erase(line.find_last_not_of(' ') + 1);  // process rows leave the last columns empty
      *out += line + "\n";
    }
  }
  *out += "  " + CommitmentLine(gpu) + "\n";
}

}  // namespace

std::string RenderStatusTable(const broker::Snapshot& snapshot) {
  std::string out = fmt::format("gpuslice state {} (layout {})\n", snapshot.path, snapshot.layout_version);
  if (snapshot.gpus.empty()) {
    out += "\nno GPU has been used through gpuslice since the state was created\n";
    return out;
  }
  for (const auto& gpu : snapshot.gpus) {
    out += "\n";
    AppendGpu(gpu, &out);
  }
  return out;
}

}  // namespace gpuslice::ctl
