#include "broker/ledger.h"

#include "broker/lock_fault.h"

namespace gpuslice::broker {

LedgerLock::LedgerLock(Segment* segment, LedgerId ledger, bool report, uint64_t timeout_ns)
    : lock_(&At(*segment, ledger).mutex.mutex, timeout_ns) {
  if (!lock_.locked()) {
    if (report) ReportLedgerLockFault(segment, ledger.value(), lock_.failure());
    return;
  }
  if (lock_.previous_owner_died()) {
    segment->header.ledger_repairs.fetch_add(1, std::memory_order_relaxed);
    At(*segment, ledger)
        .used.store(SumRegisteredCharges(*segment, ledger.tenant(), ledger.gpu()), std::memory_order_release);
  }
}

uint64_t SumRegisteredCharges(const Segment& segment, TenantIndex tenant, GpuIndex gpu) {
  // Slots claimed after this load have no charge on this ledger: charging needs its mutex.
  uint64_t sum = 0;
  for (ProcessSlot slot : UsedProcessSlots(segment)) {
    const ProcessEntry& process = At(segment, slot);
    // Without the table mutex, the slot may be freed and claimed by another tenant's process
    // between reading its tenant and its charge; the generation (bumped at every claim) tells.
    // Bounded: a generation that never settles (a forged one, bumped in a loop) must not hang
    // the repair; its last charge read then counts, which can only make the ledger refuse more.
    for (int attempt = 0; attempt < 1000; ++attempt) {
      const uint64_t generation = process.generation.load();
      if (process.state.load() != static_cast<uint32_t>(ProcessState::kRegistered) ||
          process.tenant.load() != tenant.value()) {
        break;  // a charge on this ledger cannot appear without its mutex: nothing to re-read
      }
      const uint64_t charged = At(process.charged, gpu).load(std::memory_order_acquire);
      if (process.generation.load() == generation || attempt == 999) {
        // A forged charge that would wrap the sum saturates instead (fail closed).
        sum = charged > UINT64_MAX - sum ? UINT64_MAX : sum + charged;
        break;
      }
    }
  }
  return sum;
}

}  // namespace gpuslice::broker
