#include "broker/ledger.h"

namespace gpuslice::broker {

LedgerLock::LedgerLock(Segment* segment, int ledger) : lock_(&segment->ledgers[ledger].mutex.mutex) {
  if (lock_.previous_owner_died()) {
    segment->header.ledger_repairs.fetch_add(1, std::memory_order_relaxed);
    segment->ledgers[ledger].used.store(SumRegisteredCharges(*segment, LedgerTenant(ledger), LedgerGpu(ledger)),
                                        std::memory_order_release);
  }
}

uint64_t SumRegisteredCharges(const Segment& segment, int tenant, int gpu) {
  // Slots claimed after this load have no charge on this ledger: charging needs its mutex.
  const uint32_t high_water = segment.header.process_high_water.load();
  uint64_t sum = 0;
  for (uint32_t i = 0; i < high_water && i < static_cast<uint32_t>(kMaxProcesses); ++i) {
    const ProcessEntry& process = segment.processes[i];
    // Without the table mutex, the slot may be freed and claimed by another tenant's process
    // between reading its tenant and its charge; the generation (bumped at every claim) tells.
    while (true) {
      const uint64_t generation = process.generation.load();
      if (process.state.load() != static_cast<uint32_t>(ProcessState::kRegistered) ||
          process.tenant.load() != tenant) {
        break;  // a charge on this ledger cannot appear without its mutex: nothing to re-read
      }
      const uint64_t charged = process.charged[gpu].load(std::memory_order_acquire);
      if (process.generation.load() == generation) {
        sum += charged;
        break;
      }
    }
  }
  return sum;
}

}  // namespace gpuslice::broker
