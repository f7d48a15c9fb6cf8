#include "ctl/status_json.h"

#include "ctl/status_report.h"
#include "ctl/units.h"

namespace gpuslice::ctl {
namespace {

using Json = nlohmann::ordered_json;

Json TenantJson(const broker::TenantView& tenant) {
  Json processes = Json::array();
  for (const auto& process : tenant.processes) {
    processes.push_back({{"pid", process.pid}, {"charged_bytes", process.charged}});
  }
  // kUnlimited is a sentinel, not a size: a consumer summing quotas must not add 2^64-1.
  const bool limited = tenant.quota != broker::kUnlimited && tenant.quota != 0;
  return {{"name", tenant.name},
          {"used_bytes", tenant.used},
          {"quota_bytes", tenant.quota == broker::kUnlimited ? Json(nullptr) : Json(tenant.quota)},
          {"used_percent_of_quota", limited ? Json(Percent(tenant.used, tenant.quota)) : Json(nullptr)},
          {"idle", IsIdle(tenant)},
          {"processes", std::move(processes)}};
}

}  // namespace

Json StatusJson(const broker::Snapshot& snapshot) {
  Json gpus = Json::array();
  for (const auto& gpu : snapshot.gpus) {
    Json tenants = Json::array();
    for (const auto& tenant : gpu.tenants) tenants.push_back(TenantJson(tenant));
    const Commitment commitment = CommitmentOf(gpu);
    gpus.push_back({{"uuid", gpu.uuid},
                    {"total_memory_bytes", gpu.total_memory},
                    {"quota_committed_bytes", commitment.quota_bytes},
                    {"unlimited_tenants", commitment.unlimited_tenants},
                    {"idle_tenants", commitment.idle_tenants},
                    {"oversubscribed", commitment.oversubscribed},
                    {"tenants", std::move(tenants)}});
  }
  return {{"state_file", snapshot.path}, {"layout_version", snapshot.layout_version}, {"gpus", std::move(gpus)}};
}

}  // namespace gpuslice::ctl
