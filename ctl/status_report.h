// What `gpuslicectl status` shows, derived once from the broker's snapshot so that the table and
// the JSON can never disagree: tenants in a stable order, and per GPU how much quota is promised.
#pragma once

#include <cstdint>

#include "broker/broker.h"

namespace gpuslice::ctl {

// A tenant with no live process on the GPU and nothing charged there. Its entry lingers in the
// segment (the broker recycles it only when the tenant table fills up), so it promises nothing:
// every process without GPUSLICE_TENANT leaves one such "proc-..." tenant behind.
bool IsIdle(const broker::TenantView& tenant);

// How much of one GPU the active (not idle) tenants' quotas promise away.
struct Commitment {
  uint64_t quota_bytes = 0;      // sum of the finite quotas
  int unlimited_tenants = 0;     // tenants without a quota
  int idle_tenants = 0;          // listed, but not counted above
  // The quotas cannot all be honoured at once: the finite ones add up to more than the device,
  // or a tenant without a quota (which may take the whole device) shares it with anyone else.
  // Allocations then fail with out-of-memory below a tenant's quota when the others are busy.
  bool oversubscribed = false;
};

Commitment CommitmentOf(const broker::GpuView& gpu);

// Sorts tenants by name and their processes by pid, so repeated runs print the same lines in the
// same place (the broker's own order is that of first use, which operators cannot predict).
void SortForDisplay(broker::Snapshot* snapshot);

}  // namespace gpuslice::ctl
