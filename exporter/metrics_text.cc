#include "exporter/metrics_text.h"

#include <cinttypes>
#include <cstdio>
#include <functional>
#include <string_view>

#include "broker/segment_layout.h"
#include "broker/unaccounted.h"
#include "common/printable.h"
#include "common/version.h"

namespace gpuslice::exporter {
namespace {

using broker::GpuView;
using broker::TenantView;

// The class a tenant set at its first launch; "" for a tenant that never launched (a memory-only
// tenant has no class, as gpuslicectl status shows "-").
const char* ClassLabel(const TenantView& tenant) {
  if (tenant.request_pct == 0) return "";
  const auto known = broker::ComputeClassFromStored(tenant.compute_class);
  return known ? broker::ComputeClassName(*known) : "standard";
}

// Writes families one after the other: HELP and TYPE once, then the samples.
class Writer {
 public:
  explicit Writer(std::string* out) : out_(out) {}

  void Family(const char* name, const char* type, const char* help) {
    *out_ += "# HELP ";
    *out_ += name;
    *out_ += ' ';
    *out_ += help;
    *out_ += "\n# TYPE ";
    *out_ += name;
    *out_ += ' ';
    *out_ += type;
    *out_ += '\n';
  }

  // name{labels} value. `labels` is already formatted (Labels below), without braces.
  void Sample(const char* name, const char* suffix, const std::string& labels, uint64_t value) {
    Head(name, suffix, labels);
    char text[32];
    const int n = std::snprintf(text, sizeof text, "%" PRIu64 "\n", value);
    out_->append(text, static_cast<size_t>(n));
  }
  void Sample(const char* name, const char* suffix, const std::string& labels, double value) {
    Head(name, suffix, labels);
    char text[40];
    const int n = std::snprintf(text, sizeof text, "%.9g\n", value);
    out_->append(text, static_cast<size_t>(n));
  }

 private:
  void Head(const char* name, const char* suffix, const std::string& labels) {
    *out_ += name;
    *out_ += suffix;
    if (!labels.empty()) {
      *out_ += '{';
      *out_ += labels;
      *out_ += '}';
    }
    *out_ += ' ';
  }
  std::string* out_;
};

void AddLabel(std::string* labels, const char* name, const std::string& value) {
  if (!labels->empty()) *labels += ',';
  *labels += name;
  *labels += "=\"";
  *labels += EscapeLabelValue(value);
  *labels += '"';
}

std::string GpuLabels(const GpuView& gpu) {
  std::string labels;
  AddLabel(&labels, "gpu", gpu.uuid);
  return labels;
}

// What the tenant families of one scrape are rendered with.
struct Scrape {
  const broker::Snapshot& snapshot;
  const PodNames* pods;                     // may be nullptr
  const std::set<std::string>* first_seen;  // may be nullptr

  bool FirstSeen(const GpuView& gpu, const TenantView& tenant) const {
    return first_seen && first_seen->contains(SeriesKey(gpu, tenant));
  }

  // Every tenant series has exactly these labels: gpu, tenant, and the Kubernetes pod's
  // namespace, pod and container (empty when the tenant did not come from the device plugin), so
  // that any two tenant families divide or join without ignoring() (docs/observability.md). The
  // class is on gpuslice_tenant_info alone.
  std::string TenantLabels(const GpuView& gpu, const TenantView& tenant) const {
    std::string labels = GpuLabels(gpu);
    AddLabel(&labels, "tenant", tenant.name);
    const PodName* pod = nullptr;
    if (pods) {
      const auto it = pods->find(tenant.name);
      if (it != pods->end()) pod = &it->second;
    }
    // Printable: a forged pods.json must not bring the target down with invalid UTF-8.
    AddLabel(&labels, "namespace", pod ? Printable(pod->namespace_name) : "");
    AddLabel(&labels, "pod", pod ? Printable(pod->pod) : "");
    AddLabel(&labels, "container", pod ? Printable(pod->container) : "");
    return labels;
  }
};

// A tenant's figure: its value, or nothing to leave the tenant out of the family.
using TenantValue = std::function<std::optional<double>(const GpuView&, const TenantView&)>;

// One family with a sample per tenant on every GPU.
void PerTenant(Writer* w, const Scrape& s, const char* name, const char* type, const char* help,
               const TenantValue& value) {
  bool any = false;
  for (const GpuView& gpu : s.snapshot.gpus) {
    for (const TenantView& tenant : gpu.tenants) {
      const auto v = value(gpu, tenant);
      if (!v) continue;
      if (!any) w->Family(name, type, help);
      any = true;
      w->Sample(name, "", s.TenantLabels(gpu, tenant), *v);
    }
  }
}

// Counters and byte figures are integers: written exactly, never through a double. A counter of a
// tenant seen for the first time reads 0 (FirstSight).
void PerTenantInt(Writer* w, const Scrape& s, const char* name, const char* type, const char* help,
                  const std::function<std::optional<uint64_t>(const TenantView&)>& value) {
  const bool counter = std::string_view(type) == "counter";
  bool any = false;
  for (const GpuView& gpu : s.snapshot.gpus) {
    for (const TenantView& tenant : gpu.tenants) {
      const auto v = value(tenant);
      if (!v) continue;
      if (!any) w->Family(name, type, help);
      any = true;
      w->Sample(name, "", s.TenantLabels(gpu, tenant), counter && s.FirstSeen(gpu, tenant) ? uint64_t{0} : *v);
    }
  }
}

void WaitHistogram(Writer* w, const Scrape& s) {
  constexpr char kName[] = "gpuslice_tenant_wait_seconds";
  bool any = false;
  for (const GpuView& gpu : s.snapshot.gpus) {
    for (const TenantView& tenant : gpu.tenants) {
      if (!any) {
        w->Family(kName, "histogram",
                  "Time a tenant's processes waited for the GPU's grant before launching, per wait.");
      }
      any = true;
      const std::string labels = s.TenantLabels(gpu, tenant);
      const bool zero = s.FirstSeen(gpu, tenant);
      // The buckets are counted apiece (segment_layout.h); Prometheus's are cumulative. The count
      // is their sum, so that it always equals the +Inf bucket even mid-update.
      uint64_t cumulative = 0;
      for (size_t i = 0; i < std::size(tenant.wait_buckets); ++i) {
        cumulative += zero ? 0 : tenant.wait_buckets[i];
        char le[32];
        if (i < std::size(broker::kWaitBucketsNs)) {
          std::snprintf(le, sizeof le, "%g", static_cast<double>(broker::kWaitBucketsNs[i]) / 1e9);
        } else {
          std::snprintf(le, sizeof le, "+Inf");
        }
        std::string bucket_labels = labels;
        AddLabel(&bucket_labels, "le", le);
        w->Sample(kName, "_bucket", bucket_labels, cumulative);
      }
      w->Sample(kName, "_sum", labels, zero ? 0.0 : static_cast<double>(tenant.wait_ns) / 1e9);
      w->Sample(kName, "_count", labels, cumulative);
    }
  }
}

void Tenants(Writer* w, const Scrape& s) {
  // The tenant's class and pod as labels of a value-1 series, for joins (group_left).
  bool any = false;
  for (const GpuView& gpu : s.snapshot.gpus) {
    for (const TenantView& tenant : gpu.tenants) {
      if (!any) {
        w->Family("gpuslice_tenant_info", "gauge",
                  "A tenant on the GPU (value 1): its compute class (latency, standard, background; empty before its "
                  "first launch sets it) beside the labels every tenant series has.");
      }
      any = true;
      std::string labels = s.TenantLabels(gpu, tenant);
      AddLabel(&labels, "class", ClassLabel(tenant));
      w->Sample("gpuslice_tenant_info", "", labels, uint64_t{1});
    }
  }
  PerTenantInt(w, s, "gpuslice_tenant_memory_used_bytes", "gauge",
               "GPU memory the tenant's live processes hold through gpuslice on the GPU.",
               [](const TenantView& t) { return std::optional<uint64_t>(t.used); });
  PerTenantInt(w, s, "gpuslice_tenant_memory_quota_bytes", "gauge",
               "The tenant's memory quota on the GPU (GPUSLICE_MEMORY_LIMIT); absent when unlimited.",
               [](const TenantView& t) {
                 return t.quota != broker::kUnlimited ? std::optional<uint64_t>(t.quota) : std::nullopt;
               });
  PerTenantInt(w, s, "gpuslice_tenant_memory_request_bytes", "gauge",
               "The memory guaranteed to the tenant on the GPU (GPUSLICE_MEMORY_REQUEST); absent when it has none.",
               [](const TenantView& t) { return t.request != 0 ? std::optional<uint64_t>(t.request) : std::nullopt; });
  PerTenantInt(w, s, "gpuslice_tenant_memory_borrowed_bytes", "gauge",
               "What the tenant holds on the GPU beyond its memory request: memory no other tenant's request "
               "reserves, which it must give back before it may borrow again once a request needs it.",
               [](const TenantView& t) { return std::optional<uint64_t>(t.borrowed()); });
  PerTenant(w, s, "gpuslice_tenant_compute_request_ratio", "gauge",
            "The tenant's compute request on the GPU (GPUSLICE_COMPUTE_REQUEST), 0 to 1; absent until its first "
            "launch sets it.",
            [](const GpuView&, const TenantView& t) {
              return t.request_pct != 0 ? std::optional<double>(t.request_pct / 100.0) : std::nullopt;
            });
  PerTenant(w, s, "gpuslice_tenant_compute_limit_ratio", "gauge",
            "The tenant's compute limit on the GPU (GPUSLICE_COMPUTE_LIMIT), 0 to 1; absent until set.",
            [](const GpuView&, const TenantView& t) {
              return t.request_pct != 0 ? std::optional<double>(t.limit_pct / 100.0) : std::nullopt;
            });
  // Only while the tenant has a process on the GPU: the last window's share of a tenant that
  // left would otherwise be shown for ever (the window rolls only at hand-overs, and an idle GPU
  // has none).
  PerTenant(w, s, "gpuslice_tenant_compute_share_ratio", "gauge",
            "The tenant's share of the GPU's time over the last complete measurement window (at least 10 s), "
            "0 to 1; absent before the first window completes and once the tenant has no process on the GPU.",
            [](const GpuView& g, const TenantView& t) {
              const bool shown = g.share_window_complete &&
                                 g.mode == static_cast<uint32_t>(broker::SharingMode::kTimeslice) &&
                                 !t.processes.empty();
              return shown ? std::optional<double>(static_cast<double>(t.last_share_ppm) / 1e6) : std::nullopt;
            });
  PerTenant(w, s, "gpuslice_tenant_compute_service_seconds_total", "counter",
            "Device time the GPU was granted to the tenant (rate() of it is the tenant's share).",
            [&s](const GpuView& g, const TenantView& t) {
              return std::optional<double>(s.FirstSeen(g, t) ? 0.0 : static_cast<double>(t.service_ns) / 1e9);
            });
  PerTenantInt(w, s, "gpuslice_tenant_grants_total", "counter",
               "Grants of the GPU the tenant received (hand-overs to it).",
               [](const TenantView& t) { return std::optional<uint64_t>(t.grants_received); });
  WaitHistogram(w, s);
  PerTenantInt(w, s, "gpuslice_tenant_refused_allocations_total", "counter",
               "Allocations refused because they would have exceeded the tenant's quota on the GPU.",
               [](const TenantView& t) { return std::optional<uint64_t>(t.refused_allocations); });
  PerTenantInt(w, s, "gpuslice_tenant_refused_bytes_total", "counter", "The sizes of the refused allocations, summed.",
               [](const TenantView& t) { return std::optional<uint64_t>(t.refused_bytes); });
  PerTenantInt(w, s, "gpuslice_tenant_processes", "gauge", "The tenant's live processes registered on the GPU.",
               [](const TenantView& t) { return std::optional<uint64_t>(t.processes.size()); });
  PerTenantInt(w, s, "gpuslice_tenant_waiting_processes", "gauge",
               "The tenant's processes waiting for the GPU's grant now.",
               [](const TenantView& t) { return std::optional<uint64_t>(t.waiting); });
}

void Gpus(Writer* w, const broker::Snapshot& s) {
  if (s.gpus.empty()) return;
  w->Family("gpuslice_gpu_memory_total_bytes", "gauge", "The GPU's memory as the driver reported it to gpuslice.");
  for (const GpuView& g : s.gpus) w->Sample("gpuslice_gpu_memory_total_bytes", "", GpuLabels(g), g.total_memory);
  w->Family("gpuslice_gpu_grants_total", "counter", "Grants of the GPU made by the compute scheduler (hand-overs).");
  for (const GpuView& g : s.gpus) w->Sample("gpuslice_gpu_grants_total", "", GpuLabels(g), g.grants);
  w->Family("gpuslice_gpu_waiting_processes", "gauge", "Processes of any tenant waiting for the GPU's grant now.");
  for (const GpuView& g : s.gpus) w->Sample("gpuslice_gpu_waiting_processes", "", GpuLabels(g), uint64_t{g.waiting});
}

void Devices(Writer* w, const std::vector<DeviceFigures>& devices) {
  if (devices.empty()) return;
  auto labels = [](const DeviceFigures& d) {
    std::string l;
    AddLabel(&l, "gpu", d.uuid);
    return l;
  };
  w->Family("gpuslice_device_info", "gauge", "A device NVML reports: its name and index (value 1).");
  for (const auto& d : devices) {
    std::string l = labels(d);
    AddLabel(&l, "name", d.name);
    AddLabel(&l, "index", std::to_string(d.index));
    w->Sample("gpuslice_device_info", "", l, uint64_t{1});
  }
  w->Family("gpuslice_device_memory_total_bytes", "gauge", "The device's memory (NVML).");
  for (const auto& d : devices)
    w->Sample("gpuslice_device_memory_total_bytes", "", labels(d), uint64_t{d.memory_total});
  w->Family("gpuslice_device_memory_used_bytes", "gauge",
            "Memory in use on the device by every process, managed or not (NVML).");
  for (const auto& d : devices) w->Sample("gpuslice_device_memory_used_bytes", "", labels(d), uint64_t{d.memory_used});
  bool any = false;
  for (const auto& d : devices) {
    if (!d.utilization_pct) continue;
    if (!any)
      w->Family("gpuslice_device_utilization_ratio", "gauge",
                "Fraction of NVML's last sample period (1/6 s to 1 s) a kernel ran on the device, 0 to 1: the "
                "busy figure of gpuslicectl status and top.");
    any = true;
    w->Sample("gpuslice_device_utilization_ratio", "", labels(d), *d.utilization_pct / 100.0);
  }
  any = false;
  for (const auto& d : devices) {
    if (!d.processes) continue;
    if (!any)
      w->Family("gpuslice_device_processes", "gauge",
                "Compute processes running on the device, managed or not (NVML).");
    any = true;
    w->Sample("gpuslice_device_processes", "", labels(d), uint64_t{*d.processes});
  }
}

// The broker's GPUs against NVML's: memory the device has in use that no tenant of this state
// directory holds (broker/unaccounted.h). Only where both know the GPU: a MIG instance, which
// NVML lists under its GPU, has no device figures here.
void Unaccounted(Writer* w, const broker::Snapshot& s, const std::vector<DeviceFigures>& devices) {
  bool any = false;
  for (const GpuView& g : s.gpus) {
    const DeviceFigures* device = nullptr;
    for (const auto& d : devices)
      if (d.uuid == g.uuid) device = &d;
    if (!device) continue;
    uint64_t accounted = 0;
    for (const auto& t : g.tenants) accounted += t.used;
    if (!any)
      w->Family("gpuslice_gpu_memory_unaccounted_bytes", "gauge",
                "Memory in use on the device (NVML) beyond what this state directory's tenants hold: other state "
                "directories' tenants, processes not under gpuslice, and driver-internal memory.");
    any = true;
    w->Sample("gpuslice_gpu_memory_unaccounted_bytes", "", GpuLabels(g),
              broker::UnaccountedBytes(device->memory_used, accounted));
  }
}

}  // namespace

std::string EscapeLabelValue(const std::string& value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string SeriesKey(const broker::GpuView& gpu, const broker::TenantView& tenant) {
  return gpu.uuid + "/" + tenant.name;
}

std::set<std::string> FirstSight::Update(const broker::Snapshot& snapshot) {
  std::set<std::string> now, fresh;
  for (const GpuView& gpu : snapshot.gpus) {
    for (const TenantView& tenant : gpu.tenants) now.insert(SeriesKey(gpu, tenant));
  }
  if (started_) {
    for (const std::string& key : now) {
      if (!known_.contains(key)) fresh.insert(key);
    }
  }
  started_ = true;
  known_ = std::move(now);  // tenants that went away are forgotten: a return is a new series
  return fresh;
}

void RenderMetrics(const ScrapeInput& input, std::string* out) {
  out->clear();
  Writer w(out);
  w.Family("gpuslice_exporter_build_info", "gauge", "The exporter's version (value 1).");
  w.Sample("gpuslice_exporter_build_info", "", "version=\"" GPUSLICE_VERSION "\"", uint64_t{1});
  w.Family("gpuslice_segment_up", "gauge",
           "1 when the broker's state file could be read at this scrape; 0 when it is missing or incompatible.");
  w.Sample("gpuslice_segment_up", "", "", uint64_t{input.snapshot != nullptr});
  w.Family("gpuslice_nvml_up", "gauge", "1 when NVML answered at this scrape.");
  w.Sample("gpuslice_nvml_up", "", "", uint64_t{input.devices != nullptr});
  if (const broker::Snapshot* s = input.snapshot) {
    w.Family("gpuslice_ledger_repairs_total", "counter",
             "Memory ledgers repaired after a process died holding their lock.");
    w.Sample("gpuslice_ledger_repairs_total", "", "", s->ledger_repairs);
    w.Family("gpuslice_processes_reaped_total", "counter",
             "Dead processes whose charges were returned to their tenant.");
    w.Sample("gpuslice_processes_reaped_total", "", "", s->processes_reaped);
    Gpus(&w, *s);
    Tenants(&w, Scrape{*s, input.pods, input.first_seen});
  }
  if (input.devices) Devices(&w, *input.devices);
  if (input.snapshot && input.devices) Unaccounted(&w, *input.snapshot, *input.devices);
}

}  // namespace gpuslice::exporter
