// `gpuslicectl plan`'s planner: which tenant goes where, and why. The rules it encodes
// (docs/choosing.md):
//  - A tenant that is untrusted, or that cannot accept another tenant's fault, gets a MIG
//    instance of its own: memory, SMs and fault domain split in hardware. gpuslice's limits are
//    cooperative and every tenant of a shared GPU (time-sliced or MPS) shares its fault domain.
//  - A trusted, fault-tolerant tenant with a p99 latency target below what time-slicing can
//    promise (kTimeSlicedP99FloorMs) needs its kernels to run beside the others': an MPS client
//    on a whole GPU, or an instance of its own on a GPU that is partitioned anyway.
//  - Every other tenant gets a soft slice (gpuslice: quota and weighted share of time, idle time
//    lent) of a whole GPU or of a shared MIG instance; with a latency target, compute class latency.
//  - Tenants of different tiers never share a GPU (nor, therefore, an instance).
// Packing is first fit over the GPUs given, isolated tenants first, larger first; it is
// deterministic. A request that cannot be met is an error, never a plan that does not hold.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "ctl/plan_gpu.h"
#include "ctl/plan_input.h"

namespace gpuslice::ctl {

// A latency-class tenant of a time-sliced GPU, beside a tenant that uses its whole share, waits
// for the other's quantum: p99 16.3 ms at the default 10 ms quantum (docs/performance.md, "The
// quantum"). Targets below this need concurrency (MPS) or SMs of their own (MIG).
inline constexpr double kTimeSlicedP99FloorMs = 20.0;

enum class GpuMode { kMig, kTimeslice, kMps };
enum class Placement { kMigInstance, kSoftSlice, kMpsClient };

const char* GpuModeName(GpuMode mode);       // "mig", "timeslice", "mps"
const char* PlacementName(Placement where);  // "mig-instance", "soft-slice", "mps-client"

// A place tenants run in: a MIG instance, or the whole GPU.
struct PlannedUnit {
  const gpu::MigProfile* profile = nullptr;  // nullptr: the whole GPU
  int start = -1;                            // first memory slice of the instance
  uint64_t memory_bytes = 0;
  double sm_percent = 100;              // its SMs as a share of the whole GPU's
  bool shared = false;                  // soft slices or MPS clients share it
  std::vector<size_t> tenants;          // indices into Plan::tenants
  uint64_t memory_unused = 0;           // not promised to any of its tenants
  uint32_t compute_unused_percent = 0;  // of the unit: no tenant is entitled to it
};

struct PlannedGpu {
  PlanGpu gpu;
  std::string tier;
  GpuMode mode = GpuMode::kTimeslice;
  std::string mig_layout;  // "3g.71gb@0,2g.35gb@4": GPUSLICE_SIM_MIG's syntax; "" unless kMig
  std::vector<PlannedUnit> units;
  // MIG only: what no instance holds.
  int free_compute_slices = 0, free_memory_slices = 0, sms_outside_instances = 0;
  uint64_t memory_outside_instances = 0;
};

struct PlannedTenant {
  PlanTenant tenant;
  Placement placement = Placement::kSoftSlice;
  size_t gpu = 0;                        // index into Plan::gpus
  size_t unit = 0;                       // index into that GPU's units
  uint32_t compute_request_percent = 0;  // of its unit (GPUSLICE_COMPUTE_REQUEST); 0 for an instance of its own
  std::string reason;
  std::vector<std::pair<std::string, std::string>> env;      // the exact GPUSLICE_* variables, in order
  std::vector<std::pair<std::string, uint64_t>> kubernetes;  // resource name, quantity
  std::string kubernetes_note;                               // what else the pod needs
};

struct Plan {
  std::vector<PlannedGpu> gpus;        // only the GPUs used
  std::vector<PlannedTenant> tenants;  // in input order
  std::vector<PlanGpu> unused_gpus;    // given but not needed
  bool fewest_gpus = false;            // the count was not given: the fewest of the model that hold them
};

// Lays `tenants` out on `gpus`. An error with one line when the request cannot be met: an
// InvalidArgument one for a tenant no GPU given could hold (more memory than a GPU, isolation
// without a MIG-capable GPU, more than the largest instance), a ResourceExhausted one for more
// GPUs or instances than given.
Result<Plan> MakePlan(const std::vector<PlanGpu>& gpus, const std::vector<PlanTenant>& tenants);

}  // namespace gpuslice::ctl
