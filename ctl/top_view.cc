#include "ctl/top_view.h"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <vector>

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
constexpr int kWideFrom = 110;

struct Row {
  const broker::TenantView* tenant;
  std::string text;
  double memory = 0;  // sort keys
  double share = 0;
  double waits = 0;
};

std::string Fit(const std::string& text, size_t width) {
  if (text.size() <= width) return text;
  return text.substr(0, width - 1) + "~";  // a long name cut, and said so
}

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

TopFrame RenderTop(const broker::Snapshot& now, const broker::Snapshot* previous, const TopLayout& layout) {
  const bool wide = layout.width == 0 || layout.width >= kWideFrom;
  // Each GPU is a section: its header line, the column headings, its rows, and the idle count.
  struct Section {
    std::string header, headings, idle;
    std::vector<Row> rows;
  };
  std::vector<Section> sections;
  for (const auto& gpu : now.gpus) {
    Section section;
    const std::string holder = ActiveHolder(gpu);
    section.header = fmt::format("{}  {}  mode {}  holder {}  waiting {}  grants {}", gpu.uuid,
                                 FormatBytes(gpu.total_memory), ModeName(gpu.mode), holder.empty() ? "-" : holder,
                                 gpu.waiting, gpu.grants);
    if (!wide) section.header = Fit(section.header, static_cast<size_t>(layout.width) - 1);
    section.headings = wide ? fmt::format("  {:<16} {:<10} {:<22} {:>21}  {:>4} {:>5}  {:>10} {:>7} {:>5}", "TENANT",
                                          "CLASS", "MEMORY", "USED / QUOTA", "REQ", "HELD", "WAIT P99", "REFUSED",
                                          "PROCS")
                            : fmt::format("  {:<15} {:<8} {:>19} {:>4} {:>5} {:>9} {:>4} {:>3}", "TENANT", "CLASS",
                                          "USED/QUOTA", "REQ", "HELD", "WAIT P99", "REF", "PRC");
    int idle = 0;
    for (const auto& tenant : gpu.tenants) {
      if (IsIdle(tenant) && tenant.refused_allocations == 0 && tenant.service_ns == 0) {
        ++idle;
        continue;
      }
      const bool limited = tenant.quota != broker::kUnlimited;
      const std::string cls = tenant.request_pct ? ClassName(tenant.compute_class) : "-";
      const std::string req = tenant.request_pct ? fmt::format("{}%", tenant.request_pct) : "-";
      const std::string share = Share(now, previous, gpu, tenant);
      Row row{&tenant, "", Percent(tenant.used, limited ? tenant.quota : gpu.total_memory), 0, WaitRank(tenant)};
      row.share = share == "-" ? -1 : std::stod(share);
      if (wide) {
        const std::string memory = FormatBytes(tenant.used) + " / " +
                                   (limited ? FormatBytes(tenant.quota) : std::string("unlimited"));
        row.text = fmt::format("  {:<16} {:<10} {:<22} {:>21}  {:>4} {:>5}  {:>10} {:>7} {:>5}", tenant.name, cls,
                               Bar(tenant.used, limited ? tenant.quota : gpu.total_memory), memory, req, share,
                               WaitP99(tenant), tenant.refused_allocations, tenant.processes.size());
      } else {
        const std::string memory = Compact(tenant.used) + "/" + (limited ? Compact(tenant.quota) : std::string("-"));
        row.text = fmt::format("  {:<15} {:<8} {:>19} {:>4} {:>5} {:>9} {:>4} {:>3}", Fit(tenant.name, 15), cls,
                               Fit(memory, 19), req, share, WaitP99(tenant), tenant.refused_allocations,
                               tenant.processes.size());
      }
      section.rows.push_back(std::move(row));
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
    sections.push_back(std::move(section));
  }

  // Pages of at most `height` lines; a section continued on a page repeats its two header lines.
  std::vector<std::vector<std::string>> pages(1);
  const int height = layout.height;
  auto room = [&](int lines) { return height <= 0 || static_cast<int>(pages.back().size()) + lines <= height; };
  for (const Section& section : sections) {
    if (height <= 0 && !pages.back().empty()) pages.back().push_back("");
    if (!room(3) && !pages.back().empty()) pages.emplace_back();  // a header with no row under it: next page
    pages.back().push_back(section.header);
    pages.back().push_back(section.headings);
    for (const Row& row : section.rows) {
      if (!room(1)) {
        pages.emplace_back();
        pages.back().push_back(section.header + " (cont.)");
        pages.back().push_back(section.headings);
      }
      pages.back().push_back(row.text);
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
