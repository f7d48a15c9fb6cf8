#include "ctl/status_report.h"

#include <algorithm>

#include <fmt/format.h>

#include "broker/sched_terms.h"
#include "broker/scheduler.h"
#include "broker/segment_layout.h"

namespace gpuslice::ctl {

bool IsIdle(const broker::TenantView& tenant) {
  return tenant.processes.empty() && tenant.used == 0 && tenant.announced == broker::MemoryAnnouncer::kNone;
}

std::string AnnouncerName(broker::MemoryAnnouncer announcer) {
  switch (announcer) {
    case broker::MemoryAnnouncer::kNone: return "nobody";
    case broker::MemoryAnnouncer::kDevicePlugin: return "gpuslice-device-plugin";
    case broker::MemoryAnnouncer::kDraDriver: return "gpuslice-dra-driver";
  }
  return fmt::format("unknown ({})", static_cast<uint32_t>(announcer));
}

Commitment CommitmentOf(const broker::GpuView& gpu) {
  Commitment commitment;
  // unsigned __int128: 256 tenants' quotas of up to 2^64-2 bytes each cannot wrap the sum.
  unsigned __int128 finite = 0, requests = 0, borrowed = 0, promised = 0;
  for (const auto& tenant : gpu.tenants) {
    if (IsIdle(tenant)) {
      ++commitment.idle_tenants;
      continue;
    }
    // A tenant with a request is promised its request (beyond it, it borrows what nobody's
    // request reserves); one without, its quota; one without a quota, the whole device.
    requests += tenant.request;
    borrowed += tenant.borrowed();
    if (tenant.quota == broker::kUnlimited) {
      ++commitment.unlimited_tenants;
    } else {
      finite += tenant.quota;
    }
    promised += tenant.request ? tenant.request : tenant.quota == broker::kUnlimited ? gpu.total_memory : tenant.quota;
  }
  auto clamp = [](unsigned __int128 sum) { return sum > UINT64_MAX - 1 ? UINT64_MAX - 1 : static_cast<uint64_t>(sum); };
  commitment.quota_bytes = clamp(finite);
  commitment.request_bytes = clamp(requests);
  commitment.borrowed_bytes = clamp(borrowed);
  commitment.oversubscribed = promised > gpu.total_memory;
  return commitment;
}

std::string ModeName(uint32_t mode) {
  switch (static_cast<broker::SharingMode>(mode)) {
    case broker::SharingMode::kTimeslice: return "timeslice";
    case broker::SharingMode::kNone: return "none";
    case broker::SharingMode::kMps: return "mps";
  }
  return fmt::format("unknown ({})", mode);
}

uint64_t EffectiveQuantumNs(const broker::GpuView& gpu) {
  return gpu.quantum_ns ? gpu.quantum_ns : broker::kDefaultQuantumNs;
}

uint64_t EffectiveBudgetNs(const broker::GpuView& gpu) {
  return gpu.budget_ns ? gpu.budget_ns : broker::kDefaultBudgetNs;
}

std::string ClassName(uint32_t compute_class) {
  const auto known = broker::ComputeClassFromStored(compute_class);
  return known ? broker::ComputeClassName(*known) : fmt::format("unknown ({})", compute_class);
}

ComputeDemand ComputeDemandOf(const broker::GpuView& gpu) {
  ComputeDemand demand;
  for (const auto& tenant : gpu.tenants) {
    if (IsIdle(tenant)) continue;
    if (tenant.request_pct == 0) {
      ++demand.unset_tenants;
    } else {
      demand.requested_pct += tenant.request_pct;
      ++demand.requesting_tenants;
    }
  }
  demand.oversubscribed = demand.requested_pct > 100;
  return demand;
}

std::optional<double> LastSharePercent(const broker::GpuView& gpu, const broker::TenantView& tenant) {
  if (gpu.mode != static_cast<uint32_t>(broker::SharingMode::kTimeslice) || !gpu.share_window_complete)
    return std::nullopt;
  return static_cast<double>(tenant.last_share_ppm) / 10'000.0;
}

std::optional<double> ShareWindowAgeSeconds(const broker::Snapshot& snapshot, const broker::GpuView& gpu) {
  if (!gpu.share_window_complete || gpu.window_start_ns == 0) return std::nullopt;
  const uint64_t age = snapshot.taken_ns > gpu.window_start_ns ? snapshot.taken_ns - gpu.window_start_ns : 0;
  return static_cast<double>(age) / 1e9;
}

std::string ActiveHolder(const broker::GpuView& gpu) {
  if (gpu.holder.empty()) return "";
  for (const auto& tenant : gpu.tenants)
    if (tenant.name == gpu.holder && !tenant.processes.empty()) return gpu.holder;
  return "";
}

void SortForDisplay(broker::Snapshot* snapshot) {
  for (auto& gpu : snapshot->gpus) {
    std::sort(gpu.tenants.begin(), gpu.tenants.end(),
              [](const broker::TenantView& a, const broker::TenantView& b) { return a.name < b.name; });
    for (auto& tenant : gpu.tenants) {
      std::sort(tenant.processes.begin(), tenant.processes.end(),
                [](const broker::ProcessView& a, const broker::ProcessView& b) { return a.pid < b.pid; });
    }
  }
}

}  // namespace gpuslice::ctl
