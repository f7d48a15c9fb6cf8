#include "ctl/top_view.h"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <vector>

#include "broker/segment_layout.h"
#include "ctl/status_device.h"
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

const char* TopSortName(TopSort sort) {
  switch (sort) {
    case TopSort::kMemory: return "memory";
    case TopSort::kShare: return "share";
    case TopSort::kWaits: return "waits";
    case TopSort::kName: break;
  }
  return "name";
}

TopSort NextTopSort(TopSort sort) {
  switch (sort) {
    case TopSort::kName: return TopSort::kMemory;
    case TopSort::kMemory: return TopSort::kShare;
    case TopSort::kShare: return TopSort::kWaits;
    case TopSort::kWaits: break;
  }
  return TopSort::kName;
}

namespace {

// Wide rows (the terminal has room): a bar of memory against quota. Compact rows fit 80 columns.
constexpr int kWideFrom = 120;

struct Row {
  const broker::TenantView* tenant;
  std::vector<std::string> lines;  // one, or the whole name on a line of its own and then the figures
  double memory = 0;               // sort keys
  double share = 0;
  double waits = 0;
};

std::string Compact(uint64_t bytes) {
  std::string text = FormatBytes(bytes);
  text.erase(std::remove(text.begin(), text.end(), ' '), text.end());
  return text;
}

// The rank a tenant's waits sort by: its p99 bucket, then how many waits.
double WaitRank(const broker::TenantView& tenant) {
  uint64_t count = 0;
  for (uint64_t bucket : tenant.wait_buckets) count += bucket;
  if (count == 0) return 0;
  const uint64_t rank = (count * 99 + 99) / 100;
  uint64_t cumulative = 0;
  for (size_t i = 0; i < std::size(tenant.wait_buckets); ++i) {
    cumulative += tenant.wait_buckets[i];
    if (cumulative >= rank) return static_cast<double>(i + 1) * 1e12 + static_cast<double>(count);
  }
  return 0;
}

}  // namespace

namespace {

// Fields packed into lines of at most `width` columns, in order, two spaces apart; a field is never
// cut (one longer than the width has a line of its own), so a name always shows whole. Lines after
// the first are indented by `indent`.
std::vector<std::string> Pack(const std::vector<std::string>& fields, size_t width, const std::string& indent) {
  std::vector<std::string> lines;
  for (const std::string& field : fields) {
    if (!lines.empty() && lines.back().size() + 2 + field.size() <= width) {
      lines.back() += "  " + field;
    } else {
      lines.push_back((lines.empty() ? "" : indent) + field);
    }
  }
  return lines;
}

struct Section {
  std::vector<std::string> header;     // the GPU's line(s)
  std::vector<std::string> continued;  // the same, on a page after its first
  std::string headings;
  std::vector<Row> rows;
  std::string idle;
};

std::vector<std::string> HeaderOf(const broker::GpuView& gpu, const gpu::DeviceFigures* device, size_t width,
                                  bool continued) {
  const std::string holder = ActiveHolder(gpu);
  std::vector<std::string> fields = {gpu.uuid, FormatBytes(gpu.total_memory), "mode " + ModeName(gpu.mode)};
  if (device && device->utilization_pct) fields.push_back(fmt::format("busy {}%", *device->utilization_pct));
  fields.push_back("holder " + (holder.empty() ? std::string("-") : holder));
  fields.push_back(fmt::format("waiting {}", gpu.waiting));
  fields.push_back(fmt::format("grants {}", gpu.grants));
  if (continued) fields.push_back("(cont.)");
  return Pack(fields, width == 0 ? SIZE_MAX : width, "  ");
}

// A tenant's row: in compact rows a name longer than its column has a line of its own, whole, and
// the figures go on the next line under the columns.
Row RowOf(const broker::Snapshot& now, const broker::Snapshot* previous, const broker::GpuView& gpu,
          const broker::TenantView& tenant, bool wide) {
  const bool limited = tenant.quota != broker::kUnlimited;
  const std::string cls = tenant.request_pct ? ClassName(tenant.compute_class) : "-";
  const std::string req = tenant.request_pct ? fmt::format("{}%", tenant.request_pct) : "-";
  const std::string share = Share(now, previous, gpu, tenant);
  Row row{&tenant, {}, Percent(tenant.used, limited ? tenant.quota : gpu.total_memory), 0, WaitRank(tenant)};
  row.share = share == "-" ? -1 : std::stod(share);
  if (wide) {
    const std::string memory = FormatBytes(tenant.used) + " / " +
                               (limited ? FormatBytes(tenant.quota) : std::string("unlimited"));
    const std::string name = tenant.name.size() <= 16 ? tenant.name : "";
    if (name.empty()) row.lines.push_back("  " + tenant.name);
    const std::string borrowed = tenant.borrowed() ? FormatBytes(tenant.borrowed()) : "-";
    row.lines.push_back(fmt::format("  {:<16} {:<10} {:<22} {:>21} {:>9}  {:>4} {:>5}  {:>10} {:>7} {:>5}", name, cls,
                                    Bar(tenant.used, limited ? tenant.quota : gpu.total_memory), memory, borrowed, req,
                                    share, WaitP99(tenant), tenant.refused_allocations, tenant.processes.size()));
  } else {
    const std::string memory = Compact(tenant.used) + "/" + (limited ? Compact(tenant.quota) : std::string("-"));
    const std::string name = tenant.name.size() <= 15 ? tenant.name : "";
    if (name.empty()) row.lines.push_back("  " + tenant.name);
    row.lines.push_back(fmt::format("  {:<15} {:<8} {:>19} {:>4} {:>5} {:>9} {:>4} {:>3}", name, cls, memory, req,
                                    share, WaitP99(tenant), tenant.refused_allocations, tenant.processes.size()));
  }
  return row;
}

Section SectionOf(const broker::Snapshot& now, const broker::Snapshot* previous, const broker::GpuView& gpu,
                  const gpu::DeviceFigures* device, const TopLayout& layout, bool wide) {
  Section section;
  section.header = HeaderOf(gpu, device, wide ? 0 : static_cast<size_t>(layout.width) - 1, false);
  section.continued = HeaderOf(gpu, device, wide ? 0 : static_cast<size_t>(layout.width) - 1, true);
  section.headings = wide ? fmt::format("  {:<16} {:<10} {:<22} {:>21} {:>9}  {:>4} {:>5}  {:>10} {:>7} {:>5}",
                                        "TENANT", "CLASS", "MEMORY", "USED / QUOTA", "BORROWED", "REQ", "HELD",
                                        "WAIT P99", "REFUSED", "PROCS")
                          : fmt::format("  {:<15} {:<8} {:>19} {:>4} {:>5} {:>9} {:>4} {:>3}", "TENANT", "CLASS",
                                        "USED/QUOTA", "REQ", "HELD", "WAIT P99", "REF", "PRC");
  int idle = 0;
  for (const auto& tenant : gpu.tenants) {
    if (IsIdle(tenant) && tenant.refused_allocations == 0 && tenant.service_ns == 0) {
      ++idle;
      continue;
    }
    section.rows.push_back(RowOf(now, previous, gpu, tenant, wide));
  }
  // The largest first, names in order on ties (and for kName).
  std::stable_sort(section.rows.begin(), section.rows.end(), [&](const Row& a, const Row& b) {
    switch (layout.sort) {
      case TopSort::kMemory: return a.memory > b.memory;
      case TopSort::kShare: return a.share > b.share;
      case TopSort::kWaits: return a.waits > b.waits;
      case TopSort::kName: break;
    }
    return false;  // SortForDisplay left them by name
  });
  if (idle > 0) section.idle = fmt::format("  ({} idle tenant{} not shown)", idle, idle == 1 ? "" : "s");
  return section;
}

}  // namespace

TopFrame RenderTop(const broker::Snapshot& now, const broker::Snapshot* previous, const TopLayout& layout,
                   const DeviceFiguresByUuid* devices) {
  const bool wide = layout.width == 0 || layout.width >= kWideFrom;
  std::vector<Section> sections;
  for (const auto& gpu : now.gpus)
    sections.push_back(SectionOf(now, previous, gpu, devices ? DeviceOf(*devices, gpu) : nullptr, layout, wide));

  // Pages of at most `height` lines; a section continued on a page repeats its header lines.
  std::vector<std::vector<std::string>> pages(1);
  const int height = layout.height;
  auto room = [&](size_t lines) { return height <= 0 || pages.back().size() + lines <= static_cast<size_t>(height); };
  auto add = [&](const std::vector<std::string>& lines) {
    for (const auto& line : lines) pages.back().push_back(line);
  };
  for (const Section& section : sections) {
    std::vector<std::string> head = section.header;
    head.push_back(section.headings);
    std::vector<std::string> continued = section.continued;
    continued.push_back(section.headings);
    if (height <= 0 && !pages.back().empty()) pages.back().push_back("");
    const size_t first = section.rows.empty() ? 0 : section.rows.front().lines.size();
    if (!room(head.size() + first) && !pages.back().empty()) pages.emplace_back();  // no header without a row
    add(head);
    for (const Row& row : section.rows) {
      if (!room(row.lines.size())) {
        pages.emplace_back();
        add(continued);
      }
      add(row.lines);
    }
    if (!section.idle.empty()) {
      if (!room(1)) pages.emplace_back();
      pages.back().push_back(section.idle);
    }
  }
  TopFrame frame;
  frame.pages = static_cast<int>(pages.size());
  frame.page = std::clamp(layout.page, 0, frame.pages - 1);
  if (now.gpus.empty()) frame.text = "No GPU in the broker yet: no tenant has allocated or launched.\n";
  for (const std::string& line : pages[static_cast<size_t>(frame.page)]) frame.text += line + "\n";
  return frame;
}

}  // namespace gpuslice::ctl
