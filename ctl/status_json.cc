#include "ctl/status_json.h"

#include "broker/unaccounted.h"
#include "ctl/status_report.h"
#include "ctl/units.h"

namespace gpuslice::ctl {
namespace {

using Json = nlohmann::ordered_json;

Json PercentOrNull(uint32_t pct) { return pct == 0 ? Json(nullptr) : Json(pct); }

Json TenantJson(const broker::GpuView& gpu, const broker::TenantView& tenant, const PodNames& pods,
                const MemoryEnforcement* enforcement) {
  Json processes = Json::array();
  for (const auto& process : tenant.processes) {
    processes.push_back({{"pid", process.pid}, {"charged_bytes", process.charged}});
  }
  // kUnlimited is a sentinel, not a size: a consumer summing quotas must not add 2^64-1.
  const bool limited = tenant.quota != broker::kUnlimited && tenant.quota != 0;
  const auto share = LastSharePercent(gpu, tenant);
  const auto pod = pods.find(tenant.name);
  Json driver = nullptr;
  if (enforcement) {
    if (const auto held = enforcement->driver_enforced.find(tenant.name); held != enforcement->driver_enforced.end())
      driver = {{"hard_bytes", held->second.hard},
                {"soft_bytes", held->second.soft},
                {"containers", held->second.containers}};
  }
  return {{"name", tenant.name},
          {"pod", pod == pods.end() ? Json(nullptr)
                                    : Json{{"namespace", pod->second.namespace_name},
                                           {"name", pod->second.pod},
                                           {"container", pod->second.container}}},
          {"used_bytes", tenant.used},
          {"quota_bytes", tenant.quota == broker::kUnlimited ? Json(nullptr) : Json(tenant.quota)},
          {"used_percent_of_quota", limited ? Json(Percent(tenant.used, tenant.quota)) : Json(nullptr)},
          {"memory_request_bytes", tenant.request},
          {"borrowed_bytes", tenant.borrowed()},
          {"request_announced_by",
           tenant.announced == broker::MemoryAnnouncer::kNone ? Json(nullptr) : Json(AnnouncerName(tenant.announced))},
          {"driver_enforced", std::move(driver)},
          {"idle", IsIdle(tenant)},
          {"compute_request_percent", PercentOrNull(tenant.request_pct)},
          {"compute_limit_percent", PercentOrNull(tenant.limit_pct)},
          {"compute_class", tenant.request_pct == 0 ? Json(nullptr) : Json(ClassName(tenant.compute_class))},
          {"last_window_share_percent", share ? Json(*share) : Json(nullptr)},
          {"compute_service_ns", tenant.service_ns},
          {"waiting_processes", tenant.waiting},
          {"grants_received", tenant.grants_received},
          {"waits", tenant.waits},
          {"wait_seconds_total", static_cast<double>(tenant.wait_ns) / 1e9},
          {"refused_allocations", tenant.refused_allocations},
          {"processes", std::move(processes)}};
}

// NVML's figures for the GPU, and this state directory's memory against them.
void AddDevice(const broker::GpuView& gpu, const gpu::DeviceFigures* device, Json* out) {
  const uint64_t accounted = AccountedBytes(gpu);
  if (!device) {
    (*out)["device"] = nullptr;
    (*out)["accounted_bytes"] = accounted;
    (*out)["unaccounted_bytes"] = nullptr;
    (*out)["unaccounted_held_elsewhere"] = nullptr;
    return;
  }
  const uint64_t used = device->memory_used;
  (*out)["device"] = {{"index", device->index},
                      {"name", device->name},
                      {"memory_used_bytes", used},
                      {"memory_free_bytes", device->memory_total > used ? device->memory_total - used : 0},
                      {"utilization_percent", device->utilization_pct ? Json(*device->utilization_pct) : Json(nullptr)},
                      {"compute_processes", device->processes ? Json(*device->processes) : Json(nullptr)},
                      {"processes", Json::array()}};
  for (const auto& process : device->process_list)
    (*out)["device"]["processes"].push_back(
        {{"pid", process.pid},
         {"name", ProcessName(process.pid)},
         {"memory_bytes", process.memory_used == ~0ULL ? Json(nullptr) : Json(process.memory_used)}});
  (*out)["accounted_bytes"] = accounted;
  (*out)["unaccounted_bytes"] = broker::UnaccountedBytes(used, accounted);
  (*out)["unaccounted_held_elsewhere"] = broker::HeldElsewhere(used, accounted, ProcessesOn(gpu, *device));
}

}  // namespace

Json StatusJson(const broker::Snapshot& snapshot, const MigTopology& mig, const DeviceFiguresByUuid& devices,
                const PodNames& pods, const EnforcementByGpu& enforcement) {
  Json gpus = Json::array();
  for (const auto& gpu : snapshot.gpus) {
    Json instance = nullptr;
    if (const auto it = mig.find(UuidKey(gpu.uuid)); it != mig.end())
      instance = {{"uuid", it->second.uuid},
                  {"profile", it->second.profile},
                  {"gpu_index", it->second.gpu_index},
                  {"gpu_uuid", it->second.gpu_uuid}};
    const auto enforced = enforcement.find(gpu.uuid);
    const MemoryEnforcement* memory = enforced == enforcement.end() ? nullptr : &enforced->second;
    Json tenants = Json::array();
    for (const auto& tenant : gpu.tenants) tenants.push_back(TenantJson(gpu, tenant, pods, memory));
    const Commitment commitment = CommitmentOf(gpu);
    const ComputeDemand demand = ComputeDemandOf(gpu);
    const auto window_age = ShareWindowAgeSeconds(snapshot, gpu);
    Json entry = {{"uuid", gpu.uuid}, {"total_memory_bytes", gpu.total_memory}, {"mig", instance}};
    AddDevice(gpu, instance.is_null() ? DeviceOf(devices, gpu) : nullptr, &entry);
    const std::string level = memory ? LevelName(memory->level) : "";
    entry.update(Json{{"memory_enforcement", level.empty() ? Json(nullptr) : Json(level)},
                      {"quota_committed_bytes", commitment.quota_bytes},
                      {"memory_requests_bytes", commitment.request_bytes},
                      {"memory_borrowed_bytes", commitment.borrowed_bytes},
                      {"unlimited_tenants", commitment.unlimited_tenants},
                      {"idle_tenants", commitment.idle_tenants},
                      {"oversubscribed", commitment.oversubscribed},
                      {"mode", ModeName(gpu.mode)},
                      {"quantum_ns", EffectiveQuantumNs(gpu)},
                      {"quantum_default", gpu.quantum_ns == 0},
                      {"budget_ns", EffectiveBudgetNs(gpu)},
                      {"budget_default", gpu.budget_ns == 0},
                      {"holder", ActiveHolder(gpu).empty() ? Json(nullptr) : Json(ActiveHolder(gpu))},
                      {"closing", gpu.closing},
                      {"waiting_processes", gpu.waiting},
                      {"grants", gpu.grants},
                      {"grant_time_ns",
                       {{"grant_start_idle", gpu.grant_start_idle_ns},
                        {"holder_idle", gpu.holder_idle_ns},
                        {"drain", gpu.drain_ns},
                        {"unheld_waiting", gpu.unheld_waiting_ns}}},
                      {"compute_requested_percent", demand.requested_pct},
                      {"compute_unset_tenants", demand.unset_tenants},
                      {"compute_oversubscribed", demand.oversubscribed},
                      {"share_window_ended_seconds_ago", window_age ? Json(*window_age) : Json(nullptr)},
                      {"tenants", std::move(tenants)}});
    gpus.push_back(std::move(entry));
  }
  return {{"state_file", snapshot.path}, {"layout_version", snapshot.layout_version}, {"gpus", std::move(gpus)}};
}

}  // namespace gpuslice::ctl
