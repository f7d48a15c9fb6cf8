#include "broker/ledger.h"

#include <algorithm>

#include "broker/lock_fault.h"

namespace gpuslice::broker {

LedgerLock::LedgerLock(Segment* segment, LedgerId ledger, bool report, uint64_t timeout_ns)
    : lock_(&At(*segment, ledger).mutex.mutex, timeout_ns) {
  if (!lock_.locked()) {
    if (report) ReportLedgerLockFault(segment, ledger, lock_.failure());
    return;
  }
  if (lock_.previous_owner_died()) {
    segment->header.ledger_repairs.fetch_add(1, std::memory_order_relaxed);
    // sabotage-point: torn-ledger-not-repaired
    At(*segment, ledger)
        .used.store(SumRegisteredCharges(*segment, ledger.tenant(), ledger.gpu()), std::memory_order_release);
  }
}

bool LedgerHealth::Suspect(LedgerId ledger) const {
  return (suspect_[ledger.value() / 64].load(std::memory_order_relaxed) >> (ledger.value() % 64)) & 1u;
}

uint64_t LedgerHealth::WaitFor(LedgerId ledger) const {
  return Suspect(ledger) ? std::min(kSuspectLockWaitNs, LockTimeoutNs()) : LockTimeoutNs();
}

void LedgerHealth::MarkFailed(LedgerId ledger) {
  suspect_[ledger.value() / 64].fetch_or(uint64_t{1} << (ledger.value() % 64), std::memory_order_relaxed);
}

bool LedgerHealth::MarkTaken(LedgerId ledger) {
  const uint64_t bit = uint64_t{1} << (ledger.value() % 64);
  return suspect_[ledger.value() / 64].fetch_and(~bit, std::memory_order_relaxed) & bit;
}

void LedgerHealth::Owe(GpuIndex gpu, uint64_t bytes) {
  std::atomic<uint64_t>& owed = owed_[gpu.value()];
  uint64_t now = owed.load(std::memory_order_relaxed);
  // Saturates: a sum past 2^64 is more than any charge, and the credit is bounded by the charge.
  while (!owed.compare_exchange_weak(now, bytes > UINT64_MAX - now ? UINT64_MAX : now + bytes,
                                     std::memory_order_relaxed)) {
  }
}

uint64_t LedgerHealth::TakeOwed(GpuIndex gpu) { return owed_[gpu.value()].exchange(0, std::memory_order_relaxed); }

void LedgerHealth::ForgetOwed() {
  for (auto& owed : owed_) owed.store(0, std::memory_order_relaxed);
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
