#include "ctl/plan_settings.h"

#include <cmath>
#include <cstdio>

#include "ctl/units.h"
#include "shim/option_values.h"

namespace gpuslice::ctl {
namespace {

std::string Ms(double ms) {
  char text[32];
  std::snprintf(text, sizeof text, "%g ms", ms);
  return text;
}

std::string Why(const PlannedTenant& pt, const PlannedGpu& gpu, const PlannedUnit& unit) {
  const PlanTenant& t = pt.tenant;
  const std::string share = std::to_string(pt.compute_request_percent) + "%";
  const std::string latency = t.latency_ms ? Ms(*t.latency_ms) : "";
  const std::string floor = Ms(kTimeSlicedP99FloorMs);
  switch (pt.placement) {
    case Placement::kMigInstance: {
      std::string why;
      if (!t.trusted)
        why =
            "untrusted: a MIG instance splits memory, SMs and faults in hardware, for any process; gpuslice's "
            "limits bind only processes that keep its preload";
      else if (!t.fault_tolerant)
        why =
            "cannot accept another tenant's fault: the tenants of a shared GPU (time-sliced or MPS) share its "
            "fault domain; a MIG instance contains faults";
      else
        why = "latency target " + latency + ", below the " + floor +
              " time-slicing can promise: an instance of its own runs its kernels on its own SMs, never waiting "
              "for a turn";
      return why + "; " + unit.profile->name + " is the smallest instance with " + FormatBytes(t.memory_bytes) +
             " and " + std::to_string(t.compute_percent) + "% of the GPU's SMs that fits beside the others";
    }
    case Placement::kMpsClient:
      if (t.latency_ms && *t.latency_ms < kTimeSlicedP99FloorMs)
        return "trusted, accepts other tenants' faults, latency target " + latency + " below the " + floor +
               " time-slicing can promise: as an MPS client its kernels run beside the others' (no turns), on at "
               "most " +
               share + " of the SMs";
      return "trusted and accepts other tenants' faults: packed on its tier's MPS GPU as a client capped at " + share +
             " of the SMs (an MPS cap is a ceiling: idle SMs are not lent)";
    case Placement::kSoftSlice: {
      std::string why = "trusted and accepts other tenants' faults: a soft slice (its quota, " + share +
                        " of the time when it wants it, idle time lent) packs it densely";
      if (unit.profile)
        why += ", in the instance its tier's soft slices share on this MIG GPU (" + share + " of " +
               unit.profile->name + " is " + std::to_string(t.compute_percent) + "% of the GPU's SMs)";
      if (t.latency_ms)
        why += "; latency target " + latency + " (at least " + floor +
               "): compute class latency, its launches go first";
      return why;
    }
  }
  return "";
}

}  // namespace

uint32_t RequestInUnit(uint32_t gpu_percent, double unit_sm_percent) {
  const double share = std::ceil(gpu_percent * 100.0 / unit_sm_percent - 1e-9);
  return static_cast<uint32_t>(std::min(100.0, std::max(1.0, share)));
}

int PluginSlices(uint64_t memory_bytes, uint32_t request_pct, uint64_t unit_memory) {
  const uint64_t slice = unit_memory / kPluginSlicesPerGpu / (1ULL << 20) * (1ULL << 20);
  const uint64_t for_memory = slice == 0 ? kPluginSlicesPerGpu : (memory_bytes + slice - 1) / slice;
  return static_cast<int>(std::min<uint64_t>(kPluginSlicesPerGpu, std::max<uint64_t>(for_memory, request_pct)));
}

std::string MemoryLimitValue(uint64_t bytes) { return shim::QuotaText(bytes); }

void FillTenantSettings(Plan* plan) {
  for (PlannedTenant& pt : plan->tenants) {
    const PlannedGpu& gpu = plan->gpus[pt.gpu];
    const PlannedUnit& unit = gpu.units[pt.unit];
    const PlanTenant& t = pt.tenant;
    pt.reason = Why(pt, gpu, unit);
    pt.env.clear();
    pt.kubernetes.clear();
    const std::string request = std::to_string(pt.compute_request_percent);
    // One resource: the slices cover the tenant's memory and its request, so one of the two
    // comes out larger than planned (a quota rounded up to whole slices, or a request raised to
    // the memory's share).
    const int slices = PluginSlices(t.memory_bytes, pt.compute_request_percent, unit.memory_bytes);
    const std::string rounded = " (" + std::to_string(slices) + " slices: " + std::to_string(slices) + "% of the " +
                                (unit.profile ? "instance" : "GPU") + "'s memory and time)";
    switch (pt.placement) {
      case Placement::kMigInstance:
        pt.kubernetes = {{std::string("nvidia.com/mig-") + unit.profile->name, 1}};
        pt.kubernetes_note =
            "NVIDIA's device plugin (migStrategy: mixed) hands out the instance; the instance is "
            "the limit, no gpuslice variables";
        break;
      case Placement::kSoftSlice:
        // What it needs is guaranteed (the request the plan packs); beyond it, up to its
        // memory_limit, it borrows only what nobody's request reserves.
        pt.env = {{"GPUSLICE_TENANT", t.name},
                  {"GPUSLICE_MEMORY_REQUEST", MemoryLimitValue(t.memory_bytes)},
                  {"GPUSLICE_MEMORY_LIMIT", MemoryLimitValue(std::max(t.memory_bytes, t.memory_limit_bytes))},
                  {"GPUSLICE_COMPUTE_REQUEST", request}};
        if (t.latency_ms) pt.env.push_back({"GPUSLICE_COMPUTE_CLASS", "latency"});
        if (unit.profile) {
          // gpuslice's plugin slices the MIG instances it is given (docs/kubernetes.md); the
          // instance must be its alone, or NVIDIA's plugin hands it out whole too.
          pt.kubernetes = {{"gpuslice.io/gpu", slices}};
          pt.kubernetes_note = "gpuslice's device plugin, with this " + std::string(unit.profile->name) +
                               " instance's MIG UUID in its devices (and NVIDIA's plugin kept off it), sets the "
                               "tenant, quota and request of the instance" +
                               rounded + (t.latency_ms ? "; add GPUSLICE_COMPUTE_CLASS=latency to the pod's env" : "");
        } else {
          pt.kubernetes = {{"gpuslice.io/gpu", slices}};
          pt.kubernetes_note = "gpuslice's device plugin sets the tenant, quota and request" + rounded +
                               (t.latency_ms ? "; add GPUSLICE_COMPUTE_CLASS=latency to the pod's env" : "");
        }
        break;
      case Placement::kMpsClient:
        pt.env = {{"GPUSLICE_TENANT", t.name},
                  {"GPUSLICE_MEMORY_REQUEST", MemoryLimitValue(t.memory_bytes)},
                  {"GPUSLICE_MEMORY_LIMIT", MemoryLimitValue(std::max(t.memory_bytes, t.memory_limit_bytes))},
                  {"GPUSLICE_COMPUTE_REQUEST", request},
                  {"GPUSLICE_COMPUTE_LIMIT", request}};
        pt.kubernetes = {{"gpuslice.io/gpu", slices}};
        pt.kubernetes_note = "gpuslice's device plugin sets the tenant, quota and request" + rounded +
                             "; add GPUSLICE_COMPUTE_LIMIT=" + request +
                             " to the pod's env (the MPS cap: CUDA_MPS_ACTIVE_THREAD_PERCENTAGE)";
        break;
    }
  }
}

}  // namespace gpuslice::ctl
