#include "ctl/top_view.h"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>

#include "broker/segment_layout.h"
#include "ctl/status_report.h"
#include "ctl/units.h"

namespace gpuslice::ctl {
namespace {

constexpr int kBarWidth = 20;

// [#######-------------]: used against the quota (or the device when unlimited).
std::string Bar(uint64_t used, uint64_t whole) {
  const double fraction = whole == 0 ? 0 : std::min(1.0, Percent(used, whole) / 100);
  const int filled = static_cast<int>(fraction * kBarWidth + 0.5);
  return "[" + std::string(filled, '#') + std::string(kBarWidth - filled, '-') + "]";
}

const broker::TenantView* Find(const broker::Snapshot* snapshot, const std::string& gpu, const std::string& tenant) {
  if (!snapshot) return nullptr;
  for (const auto& g : snapshot->gpus) {
    if (g.uuid != gpu) continue;
    for (const auto& t : g.tenants)
      if (t.name == tenant) return &t;
  }
  return nullptr;
}

std::string Share(const broker::Snapshot& now, const broker::Snapshot* previous, const broker::GpuView& gpu,
                  const broker::TenantView& tenant) {
  if (previous) {
    const broker::TenantView* before = Find(previous, gpu.uuid, tenant.name);
    const uint64_t elapsed = now.taken_ns - previous->taken_ns;
    if (!before || elapsed == 0 || tenant.service_ns < before->service_ns) return "-";
    return fmt::format("{:.0f}%", std::min(100.0, Percent(tenant.service_ns - before->service_ns, elapsed)));
  }
  const auto share = LastSharePercent(gpu, tenant);
  return share ? fmt::format("{:.0f}%", *share) : "-";
}

}  // namespace

std::string WaitP99(const broker::TenantView& tenant) {
  uint64_t count = 0;
  for (uint64_t bucket : tenant.wait_buckets) count += bucket;
  if (count == 0) return "-";
  // The smallest bucket holding the 99th percentile wait (nearest rank).
  const uint64_t rank = (count * 99 + 99) / 100;
  uint64_t cumulative = 0;
  for (size_t i = 0; i < std::size(tenant.wait_buckets); ++i) {
    cumulative += tenant.wait_buckets[i];
    if (cumulative < rank) continue;
    if (i < std::size(broker::kWaitBucketsNs)) return "<= " + FormatDuration(broker::kWaitBucketsNs[i]);
    break;
  }
  return "> " + FormatDuration(broker::kWaitBucketsNs[std::size(broker::kWaitBucketsNs) - 1]);
}

std::string RenderTop(const broker::Snapshot& now, const broker::Snapshot* previous) {
  std::string out;
  if (now.gpus.empty()) out += "No GPU in the broker yet: no tenant has allocated or launched.\n";
  for (const auto& gpu : now.gpus) {
    const std::string holder = ActiveHolder(gpu);
    out += fmt::format("{}  {}  mode {}  holder {}  waiting {}  grants {}\n", gpu.uuid, FormatBytes(gpu.total_memory),
                       ModeName(gpu.mode), holder.empty() ? "-" : holder, gpu.waiting, gpu.grants);
    out += fmt::format("  {:<16} {:<10} {:<22} {:>21}  {:>4} {:>5}  {:>10} {:>7} {:>5}\n", "TENANT", "CLASS",
                       "MEMORY", "USED / QUOTA", "REQ", "SHARE", "WAIT P99", "REFUSED", "PROCS");
    int idle = 0;
    for (const auto& tenant : gpu.tenants) {
      if (IsIdle(tenant) && tenant.refused_allocations == 0 && tenant.service_ns == 0) {
        ++idle;
        continue;
      }
      const bool limited = tenant.quota != broker::kUnlimited;
      const std::string memory =
          FormatBytes(tenant.used) + " / " + (limited ? FormatBytes(tenant.quota) : std::string("unlimited"));
      out += fmt::format("  {:<16} {:<10} {:<22} {:>21}  {:>4} {:>5}  {:>10} {:>7} {:>5}\n", tenant.name,
                         tenant.request_pct ? ClassName(tenant.compute_class) : "-",
                         Bar(tenant.used, limited ? tenant.quota : gpu.total_memory), memory,
                         tenant.request_pct ? fmt::format("{}%", tenant.request_pct) : "-",
                         Share(now, previous, gpu, tenant), WaitP99(tenant), tenant.refused_allocations,
                         tenant.processes.size());
    }
    if (idle > 0) out += fmt::format("  ({} idle tenant{} not shown)\n", idle, idle == 1 ? "" : "s");
    out += "\n";
  }
  return out;
}

}  // namespace gpuslice::ctl
