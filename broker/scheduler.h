// What the operator and a tenant's first use set of a GPU's compute time-slicing: its sharing mode,
// quantum and budget (gpuslicectl set), and a tenant's request, limit and class shown before its
// first launch. The gate a process launches through is broker/compute_gate.h.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "broker/broker.h"
#include "broker/compute_gate.h"
#include "broker/grant_policy.h"
#include "broker/sched_lock.h"
#include "broker/segment_layout.h"
#include "common/mutex.h"

namespace gpuslice::broker {

// Records the tenant's request, limit and class on the GPU of `ledger` when its processes have
// not set them yet (request 0), as ComputeGate::SetShare would at the first launch: so that
// `gpuslicectl status` shows what a tenant asks for before it launches. Never refuses: a tenant
// whose values are set already keeps them (SetShare judges a disagreement at the launch, as
// before), and a scheduler lock not free within `lock_timeout_ns` leaves them for SetShare.
void PresetShare(Broker* broker, LedgerId ledger, uint32_t request_pct, uint32_t limit_pct, ComputeClass cls,
                 uint64_t lock_timeout_ns = SchedLockTimeoutNs());

// Policy, for gpuslicectl: the GPU's sharing mode and quantum (0 = the default).
Status SetGpuPolicy(Segment* segment, const uint8_t (&uuid)[16], SharingMode mode, uint64_t quantum_ns);
// The work a holder may keep queued on the GPU while other tenants share it (0 = the default).
Status SetGpuBudget(Segment* segment, const uint8_t (&uuid)[16], uint64_t budget_ns);

}  // namespace gpuslice::broker
