#include "shim/queued_work_budget.h"

#include <algorithm>

namespace gpuslice::shim {

// At least two kernels (unlimited tenants): one running and the next queued behind it. With one,
// the device would idle at every completion for as long as the launcher takes to wake and launch
// again, whenever another tenant merely had the GPU open.
//
// Beside a latency-class tenant within its request, the budget is what a latency request is
// promised to wait for beyond the running kernel: 1 ms. In kernels it is shared by the tenant's
// processes on the GPU (at least one kernel each; with one process, two). In kernels, a second
// kernel longer than the 1 ms would lie whole behind the running one, and each process keeps one
// running; so it is counted in time too, over all the GPU's processes at once
// (shim/queue_drain_prediction.h): a kernel goes in once the work queued before it, whoever's,
// is predicted to have at most the 1 ms left.
void QueuedWorkBudget::Update(const broker::ComputeGate& gate, const broker::ComputeGate::Neighbours& neighbours) {
  const uint64_t kernel = std::max<uint64_t>(kernel_ns_.load(std::memory_order_relaxed), 1);
  uint64_t budget_ns = gate.BudgetNs();
  const bool beside_latency = neighbours.latency && gate.compute_class() != broker::ComputeClass::kLatency;
  const uint32_t processes = std::max<uint32_t>(neighbours.own_processes, 1);
  const uint64_t ahead_ns = std::min(budget_ns, kBesideLatencyNs);
  if (beside_latency) budget_ns = ahead_ns / processes;
  const uint64_t kernels = (budget_ns + kernel - 1) / kernel;
  // A limited tenant's grant ends with its queue drained (its limit is a ceiling): one kernel
  // queued at least, as a waiter owed the GPU waits for what it has queued. So does each of several
  // processes beside a latency tenant: the others keep the device busy at its completions.
  const uint64_t least = gate.limited() || (beside_latency && processes > 1) ? 1 : kMinKernels;
  const auto budget = static_cast<uint32_t>(std::clamp<uint64_t>(kernels, least, kMaxKernels));
  kernels_.store(budget, std::memory_order_relaxed);
  drain_.SetAhead(beside_latency ? std::max<uint64_t>(ahead_ns, 1) : 0);
  // A launcher over the budget waits for its oldest marker, and launches again with what lies
  // beyond that marker still queued: a quarter of the budget (at least a kernel), plenty to keep
  // the device busy while it wakes, and each marker costs two driver calls (record, wait).
  // sabotage-point: marker-every-launch
  marker_every_.store(std::max<uint32_t>(1, budget * 3 / 4), std::memory_order_relaxed);
}

}  // namespace gpuslice::shim
