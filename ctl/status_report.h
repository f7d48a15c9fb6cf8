// What `gpuslicectl status` shows, derived once from the broker's snapshot so that the table and
// the JSON can never disagree: tenants in a stable order, and per GPU how much quota is promised.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "broker/snapshot.h"

namespace gpuslice::ctl {

// A tenant with no live process on the GPU and nothing charged there. Its entry lingers in the
// segment (the broker recycles it only when the tenant table fills up), so it promises nothing:
// every process without GPUSLICE_TENANT leaves one such "proc-..." tenant behind.
bool IsIdle(const broker::TenantView& tenant);

// "gpuslice-dra-driver": who announced a tenant's memory request.
std::string AnnouncerName(broker::MemoryAnnouncer announcer);

// How much of one GPU the active (not idle) tenants' quotas promise away.
struct Commitment {
  uint64_t quota_bytes = 0;     // sum of the finite quotas
  uint64_t request_bytes = 0;   // sum of the memory requests (GPUSLICE_MEMORY_REQUEST)
  uint64_t borrowed_bytes = 0;  // what tenants hold beyond their requests
  int unlimited_tenants = 0;    // tenants without a quota
  int idle_tenants = 0;         // listed, but not counted above
  // The promises cannot all be honoured at once: the requests, and the quotas of tenants without
  // one, add up to more than the device, or a tenant without either (which may take the whole
  // device) shares it with anyone else. A limit above a request is not a promise (it borrows).
  // Allocations then fail with out-of-memory below a tenant's quota when the others are busy.
  bool oversubscribed = false;
};

Commitment CommitmentOf(const broker::GpuView& gpu);

// The GPU's sharing mode as gpuslicectl set takes it: "timeslice", "none", "mps" ("unknown (N)"
// for a value this build does not know).
std::string ModeName(uint32_t mode);

// The quantum in force: the GPU's own, or the built-in default when it has none (0).
uint64_t EffectiveQuantumNs(const broker::GpuView& gpu);
// The queued-work budget in force, likewise.
uint64_t EffectiveBudgetNs(const broker::GpuView& gpu);
// A tenant's compute class as GPUSLICE_COMPUTE_CLASS names it: "standard", "latency", "background".
std::string ClassName(uint32_t compute_class);

// How much of one GPU's time the active tenants ask for (GPUSLICE_COMPUTE_REQUEST). A tenant's
// first process on the GPU sets its request when it opens its ledger there (broker::PresetShare);
// a tenant whose request is not set (an older shim, or the scheduler lock was busy) counts as
// "not launched yet" until its first kernel launch sets it.
struct ComputeDemand {
  uint64_t requested_pct = 0;  // sum of the active tenants' requests
  int requesting_tenants = 0;  // active tenants with a request
  int unset_tenants = 0;       // active tenants that have not launched yet
  // The requests add up to more than the whole GPU: no tenant can be given all it asked for
  // while every one wants the GPU, so each gets request / sum of the requests of those waiting.
  bool oversubscribed = false;
};

ComputeDemand ComputeDemandOf(const broker::GpuView& gpu);

// The tenant's share of the GPU's time over the last complete window, as a percentage; empty
// when no window has completed yet on that GPU or it is not time-sliced (nothing is measured).
std::optional<double> LastSharePercent(const broker::GpuView& gpu, const broker::TenantView& tenant);

// Seconds since the last complete share window ended; empty when there is none.
std::optional<double> ShareWindowAgeSeconds(const broker::Snapshot& snapshot, const broker::GpuView& gpu);

// The tenant holding the GPU, or "" when nobody does. A grant outlives its holder's processes in
// the segment (the scheduler hands it over only when someone else asks), so a holder with no live
// process on this GPU holds nothing: the GPU is idle, and is shown so.
std::string ActiveHolder(const broker::GpuView& gpu);

// Sorts tenants by name and their processes by pid, so repeated runs print the same lines in the
// same place (the broker's own order is that of first use, which operators cannot predict).
void SortForDisplay(broker::Snapshot* snapshot);

}  // namespace gpuslice::ctl
