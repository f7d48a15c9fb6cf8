// A tenant's memory ledger on one GPU, and the repair that follows a holder's death.
//
// The ledger invariant: while its mutex is free and consistent, a ledger's `used` equals the sum
// of charged[gpu] over the registered processes of its tenant. Every update keeps it (both sides
// change under the ledger's mutex); a holder killed between the two stores leaves the mutex
// owner-dead, and the next locker recomputes `used` from the charges before reading it. A dead
// process stays registered — its charge counted — until the reaper returns the charge and frees
// the slot, so every byte is subtracted exactly once, however many processes die mid-update.
#pragma once

#include <atomic>
#include <cstdint>

#include "broker/checked_index.h"
#include "broker/lock_fault.h"
#include "broker/segment_layout.h"
#include "common/robust_mutex.h"

namespace gpuslice::broker {

// Holds a ledger's robust mutex, with the ledger repaired if the previous holder died. A mutex
// in a bad state, or held past kRobustLockTimeoutNs, is not taken: locked() is false, the fault
// has been reported (broker/lock_fault.h), and the caller must leave the ledger alone.
class LedgerLock {
 public:
  // `report`: false when the caller reports the failure itself (in an error it returns).
  // `timeout_ns`: how long to wait for a holder (LockTimeoutNs() by default).
  LedgerLock(Segment* segment, LedgerId ledger, bool report = true, uint64_t timeout_ns = LockTimeoutNs());
  LedgerLock(const LedgerLock&) = delete;
  LedgerLock& operator=(const LedgerLock&) = delete;

  [[nodiscard]] bool locked() const { return lock_.locked(); }
  LockFailure failure() const { return lock_.failure(); }
  bool repaired() const { return lock_.previous_owner_died(); }

 private:
  RobustLock lock_;
};

// What one process remembers of the ledger locks it could not take. A lock held past the bound
// (a holder stopped by a debugger or the cgroup freezer for 12 s) or found in a bad state is not
// given up on for good: the holder is released at last, and bytes a writer changed may be written
// back. While a ledger is suspect, its next lockers wait only kSuspectLockWaitNs (a call is
// refused at once, not after another full wait); the first that takes the lock clears the mark,
// and credits the frees this process could not credit meanwhile (they stay charged until then:
// the tenant is refused more, never less). A process is one tenant, so what it owes is per GPU.
class LedgerHealth {
 public:
  // Longer than any critical section of the broker (microseconds; a reap, milliseconds).
  static constexpr uint64_t kSuspectLockWaitNs = 20'000'000;

  bool Suspect(LedgerId ledger) const;
  // The wait for the lock: LockTimeoutNs(), or kSuspectLockWaitNs while suspect.
  uint64_t WaitFor(LedgerId ledger) const;
  void MarkFailed(LedgerId ledger);
  // Clears the mark; true when there was one.
  bool MarkTaken(LedgerId ledger);

  void Owe(GpuIndex gpu, uint64_t bytes);
  uint64_t TakeOwed(GpuIndex gpu);
  void ForgetOwed();

 private:
  std::atomic<uint64_t> suspect_[kMaxLedgers / 64] = {};  // bit per ledger
  std::atomic<uint64_t> owed_[kMaxGpus] = {};
};

// The sum of charged[gpu] over the processes registered as `tenant`. Call with the ledger's mutex
// held (so those charges cannot change); slots claimed or freed meanwhile are read consistently.
uint64_t SumRegisteredCharges(const Segment& segment, TenantIndex tenant, GpuIndex gpu);

}  // namespace gpuslice::broker
