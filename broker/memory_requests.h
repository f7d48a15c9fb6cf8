// What the tenants' memory requests reserve on one GPU, and the rule that lets a tenant borrow
// the rest (docs/accounting.md, "Requests and limits").
//
// A tenant's request on a GPU is HELD while some registered process of the tenant has its ledger
// there open, or while the node announced it (LedgerEntry::announced). Each tenant commits
// max(used, its held request) of the GPU — a tenant without a held request commits what it uses.
// The rule:
//   - a tenant within its request allocates without looking at anyone else (its request is
//     reserved for it);
//   - above its request (every allocation of a tenant without one), the GPU's commitments with
//     the allocation counted must stay within the GPU's memory, whenever some tenant of the GPU
//     holds a request; on a GPU where nobody does, nothing is checked (the driver's own refusal
//     is the only one, as before requests existed);
//   - a request is held only if the requests held on the GPU stay within its memory, and the
//     commitments of the others leave it room (else borrowers hold its memory: refused, naming
//     them; an announcement is held regardless, and the borrowers then only give back).
// Both kinds of decision are taken under the GPU's memory_mutex, with the deciding tenant's
// ledger mutex held (lock order: table, ledger, GPU memory). Others' `used` is read without their
// ledger mutex: a writer updates it before its process's charge, so a half-done update reads
// high (refusing more, never less), and a free reads as soon as it lowers it.
#pragma once

#include <cstdint>
#include <string>

#include "broker/checked_index.h"
#include "broker/memory_share.h"
#include "broker/segment_layout.h"
#include "common/robust_mutex.h"
#include "common/status.h"

namespace gpuslice::broker {

// The GPU's memory_mutex, waited for at most `timeout_ns`; a failure is reported once (the
// caller refuses what it was deciding: fail closed).
class GpuMemoryLock {
 public:
  GpuMemoryLock(Segment* segment, GpuIndex gpu, uint64_t timeout_ns);
  GpuMemoryLock(const GpuMemoryLock&) = delete;
  GpuMemoryLock& operator=(const GpuMemoryLock&) = delete;
  [[nodiscard]] bool locked() const { return lock_.locked(); }
  LockFailure failure() const { return lock_.failure(); }

 private:
  RobustLock lock_;
};

// The other tenants of a GPU, as a decision for `except` sees them.
struct OtherTenants {
  uint64_t held_requests = 0;  // the requests they hold
  uint64_t committed = 0;      // Σ max(used, held request)
};
OtherTenants OthersOnGpu(const Segment& segment, GpuIndex gpu, TenantIndex except);

// Whether a tenant whose request is `request` (held) may use `used_after` bytes of a GPU of
// `total` bytes beside `others`. Within the request: always.
bool FitsBeside(uint64_t total, const OtherTenants& others, uint64_t request, uint64_t used_after);

// With the ledger's mutex held: stores the ledger's request, keeping GpuEntry::request_ledgers
// (raised before a request appears, lowered after one goes: it never reads low).
void SetRequest(Segment* segment, LedgerId ledger, uint64_t request);

// With the ledger's mutex held: makes its request held, under the GPU's memory lock. Refused
// (ResourceExhausted, one line) when the requests held on the GPU would exceed its memory, or —
// with `refuse_if_borrowed` — when the others' commitments leave the request no room (borrowers
// hold it: BorrowedAwayLine). Without it the request is held all the same and *borrowed_line
// says who holds the memory. `announce` (not kNone) is stored in the ledger once decided, under
// the lock: what makes an announcement held; a process's request is held by its open mark, set
// before. Unavailable when the lock cannot be taken.
Status HoldRequest(Segment* segment, LedgerId ledger, uint64_t timeout_ns, bool refuse_if_borrowed,
                   MemoryAnnouncer announce, std::string* borrowed_line);

// True when the tenant's request on `gpu` is held by something other than `except_process`
// (another of its processes with the ledger open, or an announcement).
bool RequestHeldElsewhere(const Segment& segment, LedgerId ledger, std::optional<ProcessSlot> except_process);

// One line each, for a request of `request` bytes by `tenant` that cannot be held on `gpu`:
// the GPU's requests would exceed it (naming every held request), or borrowers hold the memory
// it needs (naming each borrower and how much beyond its request it holds).
std::string RequestsOverGpuLine(const Segment& segment, GpuIndex gpu, TenantIndex tenant, uint64_t request);
std::string BorrowedAwayLine(const Segment& segment, GpuIndex gpu, TenantIndex tenant, uint64_t request);

// The GPU's UUID as its entry holds it ("GPU-...").
std::string GpuUuidOf(const Segment& segment, GpuIndex gpu);

// "4 GiB", "1.5 GiB", "300 MiB", "unlimited".
std::string MemoryText(uint64_t bytes);

}  // namespace gpuslice::broker
