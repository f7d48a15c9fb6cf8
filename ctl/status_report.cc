#include "ctl/status_report.h"

#include <algorithm>

namespace gpuslice::ctl {

bool IsIdle(const broker::TenantView& tenant) { return tenant.processes.empty() && tenant.used == 0; }

Commitment CommitmentOf(const broker::GpuView& gpu) {
  Commitment commitment;
  // unsigned __int128: 256 tenants' quotas of up to 2^64-2 bytes each cannot wrap the sum.
  unsigned __int128 finite = 0;
  for (const auto& tenant : gpu.tenants) {
    if (IsIdle(tenant)) {
      ++commitment.idle_tenants;
    } else if (tenant.quota == broker::kUnlimited) {
      ++commitment.unlimited_tenants;
    } else {
      finite += tenant.quota;
    }
  }
  commitment.quota_bytes = finite > UINT64_MAX - 1 ? UINT64_MAX - 1 : static_cast<uint64_t>(finite);
  // A tenant without a quota counts as promised the whole device.
  const unsigned __int128 promised =
      finite + static_cast<unsigned __int128>(commitment.unlimited_tenants) * gpu.total_memory;
  commitment.oversubscribed = promised > gpu.total_memory;
  return commitment;
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
