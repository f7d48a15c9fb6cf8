#include "ctl/status_table.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "broker/segment_layout.h"
#include "ctl/status_report.h"
#include "ctl/units.h"

namespace gpuslice::ctl {
namespace {

struct Row {
  std::string name{};  // tenant name, or "  pid N" beneath its tenant
  std::string used{};
  std::string memory_request{};
  std::string quota{};
  std::string percent{};
  std::string borrowed{};
  std::string request{};
  std::string limit{};
  std::string compute_class{};
  std::string share{};
  bool note = false;  // a line of text beneath its tenant, outside the columns
};

std::string PercentCell(uint32_t pct) { return pct == 0 ? "-" : fmt::format("{}%", pct); }

std::string ComputeLine(const broker::GpuView& gpu) {
  const uint64_t quantum = EffectiveQuantumNs(gpu);
  const std::string quantum_text =
      fmt::format("quantum {}{}", FormatDuration(quantum), gpu.quantum_ns == 0 ? " (default)" : "") +
      fmt::format(", budget {}{}", FormatDuration(EffectiveBudgetNs(gpu)), gpu.budget_ns == 0 ? " (default)" : "");
  switch (static_cast<broker::SharingMode>(gpu.mode)) {
    case broker::SharingMode::kTimeslice: break;
    case broker::SharingMode::kNone:
      return fmt::format("compute: none (memory quotas only: launches are not gated), {}", quantum_text);
    case broker::SharingMode::kMps:
      return fmt::format("compute: mps (launches are not gated: MPS shares the SMs), {}", quantum_text);
    default: return fmt::format("compute: {}, {}", ModeName(gpu.mode), quantum_text);
  }
  const std::string holder = ActiveHolder(gpu);
  std::string line =
      fmt::format("compute: timeslice, {}; {}", quantum_text,
                  holder.empty() && gpu.waiting == 0 ? "idle" : "held by " + (holder.empty() ? "nobody" : holder));
  if (!holder.empty() && gpu.closing) line += " (draining to hand over)";
  if (gpu.waiting > 0) line += fmt::format(", {} process{} waiting", gpu.waiting, gpu.waiting == 1 ? "" : "es");
  line += fmt::format("; {} grant{}", gpu.grants, gpu.grants == 1 ? "" : "s");
  return line;
}

std::string DemandLine(const broker::GpuView& gpu) {
  const ComputeDemand d = ComputeDemandOf(gpu);
  if (d.requesting_tenants == 0 && d.unset_tenants == 0) return "compute requested: none (no active tenant)";
  if (d.requesting_tenants == 0) {
    return fmt::format("compute requested: none yet ({} tenant{} not launched yet)", d.unset_tenants,
                       d.unset_tenants == 1 ? "" : "s");
  }
  std::string line = fmt::format("compute requested: {}% by {} tenant{}", d.requested_pct, d.requesting_tenants,
                                 d.requesting_tenants == 1 ? "" : "s");
  if (d.unset_tenants > 0) line += fmt::format(" ({} more not launched yet)", d.unset_tenants);
  if (d.oversubscribed) line += " -- oversubscribed: requests are shared in proportion";
  return line;
}

std::string ShareLine(const broker::Snapshot& snapshot, const broker::GpuView& gpu) {
  if (gpu.mode != static_cast<uint32_t>(broker::SharingMode::kTimeslice))
    return "HELD: not measured (launches are not gated)";
  if (const auto age = ShareWindowAgeSeconds(snapshot, gpu))
    return fmt::format(
        "HELD: time each tenant held the GPU (its turns, drain included) in the last complete window "
        "(hand-over to hand-over, 10 s or more), which ended {:.1f} s ago",
        *age);
  return "HELD: - until a first window of taking turns (10 s or more) completes";
}

std::string QuotaText(uint64_t quota) { return quota == broker::kUnlimited ? "unlimited" : FormatBytes(quota); }

std::string CommitmentLine(const broker::GpuView& gpu) {
  const Commitment c = CommitmentOf(gpu);
  std::string line = fmt::format("quota committed: {} of {} ({})", FormatBytes(c.quota_bytes),
                                 FormatBytes(gpu.total_memory), FormatPercent(c.quota_bytes, gpu.total_memory));
  if (c.request_bytes > 0) {
    line += fmt::format(", requests held: {} ({}), borrowed: {}", FormatBytes(c.request_bytes),
                        FormatPercent(c.request_bytes, gpu.total_memory), FormatBytes(c.borrowed_bytes));
  }
  if (c.unlimited_tenants > 0) {
    line += fmt::format(", plus {} tenant{} without a quota", c.unlimited_tenants, c.unlimited_tenants == 1 ? "" : "s");
  }
  if (c.idle_tenants > 0) {
    line += fmt::format("; {} idle tenant{} not counted", c.idle_tenants, c.idle_tenants == 1 ? "" : "s");
  }
  if (c.oversubscribed) {
    line += c.quota_bytes > gpu.total_memory ? " -- OVERSUBSCRIBED: the quotas exceed the device"
                                             : " -- OVERSUBSCRIBED: a tenant without a quota shares the device";
  }
  return line;
}

void AppendGpu(const broker::Snapshot& snapshot, const broker::GpuView& gpu, const MigInstanceInfo* instance,
               const gpu::DeviceFigures* device, const PodNames& pods, const MemoryEnforcement* enforcement,
               std::string* out) {
  if (instance)
    *out += fmt::format("MIG {} {}  {} total\n", instance->profile, instance->uuid, FormatBytes(gpu.total_memory));
  else *out += fmt::format("GPU {}  {} total\n", gpu.uuid, FormatBytes(gpu.total_memory));
  if (device) {
    *out += "  " + DeviceLine(*device) + "\n";
    if (const std::string processes = DeviceProcessesLine(*device); !processes.empty()) *out += "  " + processes + "\n";
    *out += "  " + AccountingLine(gpu, *device) + "\n";
  }
  *out += "  " + ComputeLine(gpu) + "\n";
  if (enforcement && !EnforcementLine(*enforcement).empty()) *out += "  " + EnforcementLine(*enforcement) + "\n";
  if (gpu.tenants.empty()) {
    *out += "  no tenants\n";
  } else {
    std::vector<Row> rows;
    rows.push_back(
        {"TENANT / PID", "USED", "MEM REQ", "QUOTA", "% QUOTA", "BORROWED", "REQUEST", "LIMIT", "CLASS", "HELD"});
    auto note = [&](const std::string& text) {
      Row row{"  " + text};
      row.note = true;
      rows.push_back(row);
    };
    for (const auto& tenant : gpu.tenants) {
      const auto share = LastSharePercent(gpu, tenant);
      rows.push_back({tenant.name, FormatBytes(tenant.used), tenant.request ? FormatBytes(tenant.request) : "-",
                      QuotaText(tenant.quota),
                      tenant.quota == broker::kUnlimited ? "-" : FormatPercent(tenant.used, tenant.quota),
                      tenant.borrowed() ? FormatBytes(tenant.borrowed()) : "-", PercentCell(tenant.request_pct),
                      PercentCell(tenant.limit_pct), tenant.request_pct == 0 ? "-" : ClassName(tenant.compute_class),
                      share ? fmt::format("{:.1f}%", *share) : "-"});
      // A Kubernetes tenant's pod (namespace/pod/container), from the device plugin's pods.json.
      if (const auto pod = pods.find(tenant.name); pod != pods.end())
        rows.push_back(Row{"  pod " + pod->second.Text()});
      if (tenant.announced != broker::MemoryAnnouncer::kNone)
        note("request held by " + AnnouncerName(tenant.announced));
      if (enforcement) {
        if (const auto held = enforcement->driver_enforced.find(tenant.name);
            held != enforcement->driver_enforced.end())
          note(DriverEnforcedText(held->second));
      }
      for (const auto& process : tenant.processes) {
        Row row{fmt::format("  pid {}", process.pid)};
        row.used = FormatBytes(process.charged);
        rows.push_back(row);
      }
      // Said, not left to the reader to infer from a missing pid row: its entry lingers from an
      // earlier run and promises nothing (status_report.h).
      if (IsIdle(tenant)) rows.push_back(Row{"  no process"});
    }
    // Tenant names run to 63 bytes: size the first column to the longest one present.
    size_t name_width = 0;
    for (const auto& row : rows)
      if (!row.note) name_width = std::max(name_width, row.name.size());
    for (const auto& row : rows) {
      if (row.note) {
        *out += "  " + row.name + "\n";
        continue;
      }
      std::string line = fmt::format("  {:<{}}  {:>10}  {:>10}  {:>10}  {:>8}  {:>10}  {:>7}  {:>5}  {:>10}  {:>6}",
                                     row.name, name_width, row.used, row.memory_request, row.quota, row.percent,
                                     row.borrowed, row.request, row.limit, row.compute_class, row.share);
      line.erase(line.find_last_not_of(' ') + 1);  // process rows leave the last columns empty
      *out += line + "\n";
    }
  }
  *out += "  " + CommitmentLine(gpu) + "\n";
  *out += "  " + DemandLine(gpu) + "\n";
  if (!gpu.tenants.empty()) *out += "  " + ShareLine(snapshot, gpu) + "\n";
}

}  // namespace

std::string RenderStatusTable(const broker::Snapshot& snapshot, const MigTopology& mig,
                              const DeviceFiguresByUuid& devices, const PodNames& pods,
                              const EnforcementByGpu& enforcement) {
  auto enforcement_of = [&](const broker::GpuView& gpu) -> const MemoryEnforcement* {
    const auto it = enforcement.find(gpu.uuid);
    return it == enforcement.end() ? nullptr : &it->second;
  };
  std::string out = fmt::format("gpuslice state {} (layout {})\n", snapshot.path, snapshot.layout_version);
  if (snapshot.gpus.empty()) {
    out += "\nno GPU has been used through gpuslice since the state was created\n";
    return out;
  }
  // Instances of one GPU together, under it, in the broker's order otherwise.
  std::vector<std::pair<const broker::GpuView*, const MigInstanceInfo*>> order;
  for (const auto& gpu : snapshot.gpus) {
    const auto it = mig.find(UuidKey(gpu.uuid));
    order.push_back({&gpu, it == mig.end() ? nullptr : &it->second});
  }
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    const std::string ka = a.second ? a.second->gpu_uuid : a.first->uuid;
    const std::string kb = b.second ? b.second->gpu_uuid : b.first->uuid;
    return ka < kb;
  });
  std::string parent;
  for (const auto& [gpu, instance] : order) {
    out += "\n";
    if (!instance) {
      AppendGpu(snapshot, *gpu, nullptr, DeviceOf(devices, *gpu), pods, enforcement_of(*gpu), &out);
      parent.clear();
      continue;
    }
    if (instance->gpu_uuid != parent) {
      out += fmt::format("GPU {} (GPU {}, {}): MIG mode; its instances in use:\n", instance->gpu_uuid,
                         instance->gpu_index, instance->gpu_name);
      parent = instance->gpu_uuid;
    }
    std::string block;
    AppendGpu(snapshot, *gpu, instance, nullptr, pods, enforcement_of(*gpu), &block);
    for (size_t at = 0; at < block.size();) {
      const size_t end = block.find('\n', at);
      out += "  " + block.substr(at, end - at + 1);
      at = end + 1;
    }
  }
  return out;
}

}  // namespace gpuslice::ctl
