// The broker: the node-wide shared state through which tenants' processes coordinate, with no
// daemon on the hot path. One fixed-layout, versioned file in GPUSLICE_STATE_DIR
// (broker/segment_layout.h; docs/broker.md) holds, per physical GPU (keyed by UUID), each
// tenant's memory ledger — quota and bytes in use — and, per process, what it has charged.
//
// Crash safety: every ledger update happens under a robust process-shared mutex, and a process's
// own charges are recorded beside the tenant total, so a process killed at any instant neither
// deadlocks the others nor leaks: the next locker repairs the total from the live processes'
// charges, and the charges of a dead process (detected by its liveness lock, which works across
// PID namespaces) are returned to its tenant.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "broker/checked_index.h"
#include "broker/memory_share.h"
#include "common/status.h"

namespace gpuslice::broker {

struct SegmentFile;  // the mapped segment (segment_layout.h)
struct Segment;
class LedgerHealth;  // ledger.h

// A request the node announced (AnnounceRequest), as Announced lists it.
struct AnnouncedRequest {
  std::string tenant;
  std::string gpu_uuid;  // "GPU-..." or "MIG-..."
  MemoryShare share;
};

class Broker {
 public:
  // Maps <state_dir>/gpuslice.state, creating the directory (0770) and the file (0660) when
  // absent. Fails closed: an error of one line for a missing/unwritable directory, a file of
  // another magic, layout version or size, a corrupt header, or a world-writable file.
  static Result<std::unique_ptr<Broker>> Attach(const std::string& state_dir);
  // Maps an existing segment for reading (gpuslicectl). Never creates anything.
  static Result<std::unique_ptr<Broker>> AttachExisting(const std::string& state_dir);
  ~Broker();
  Broker(const Broker&) = delete;
  Broker& operator=(const Broker&) = delete;

  // Makes this process a member of `tenant` (at most 63 bytes) and holds its liveness lock until
  // Unregister or death. An error when the name is invalid or a table is full.
  Status Register(const std::string& tenant);
  // Orderly exit: returns every byte this process still has charged and frees its slot.
  void Unregister();

  // The ledger of this process's tenant on the GPU with `uuid` (created on first use, with the
  // given request and limit; a limit of kUnlimited = no quota). A tenant's share of a GPU is set
  // by its first process (or by the node's announcement); a later process asking for another is
  // refused (the error names both). Opening holds the tenant's request (broker/memory_requests.h):
  // refused with one line when the GPU's requests would exceed its memory, or when borrowers hold
  // memory the request needs (naming them; a later open succeeds once they freed it).
  // Returns the ledger for Reserve/Release.
  Result<LedgerId> OpenLedger(const uint8_t (&uuid)[16], uint64_t device_total_bytes, MemoryShare share);
  // A quota alone: a limit without a request.
  Result<LedgerId> OpenLedger(const uint8_t (&uuid)[16], uint64_t device_total_bytes, uint64_t quota) {
    return OpenLedger(uuid, device_total_bytes, MemoryShare{0, quota});
  }

  // Reserve-then-allocate: atomically charges `bytes` to the tenant and this process if the
  // tenant stays within its limit and, above its request, within the memory no other tenant's
  // request reserves (broker/memory_requests.h); false otherwise (dead processes are reaped and
  // the check retried once before refusing). Concurrent reservations of every process of every
  // tenant can never break either rule, not even momentarily. A ledger this process has not
  // opened (another tenant's, or after Unregister) charges nothing: false.
  bool Reserve(LedgerId ledger, uint64_t bytes);
  // Returns bytes reserved by this process (a rolled-back reservation or a free).
  void Release(LedgerId ledger, uint64_t bytes);

  // This process's tenant's ledger on the GPU with `uuid` if some process of the tenant opened
  // it, else nullopt. Read-only (for views such as NVML's that must not set a quota).
  std::optional<LedgerId> FindLedger(const uint8_t (&uuid)[16]) const;

  uint64_t Used(LedgerId ledger) const;
  uint64_t Quota(LedgerId ledger) const;  // the limit
  uint64_t Request(LedgerId ledger) const;
  // What the tenant could still reserve on the GPU of `ledger` now: what is left of its request,
  // or, when more, what it may borrow, within its limit (lock-free reads: a figure at rest).
  uint64_t Available(LedgerId ledger) const;
  // What every tenant of this state directory holds on the GPU of `ledger`, summed (lock-free
  // reads: a figure at rest, for the unaccounted-memory warning of broker/unaccounted.h).
  uint64_t GpuUsed(LedgerId ledger) const;
  // The live processes of this state directory that use the GPU of `ledger` (this one included).
  int GpuProcesses(LedgerId ledger) const;

  // Returns the charges of every process that died (any PID namespace) to its tenant.
  void ReapDeadProcesses();

  // --- the node's side (broker/memory_announcements.cc): gpuslice-device-plugin and
  // gpuslice-dra-driver, without registering a process ---
  //
  // Holds `tenant`'s request on the GPU before any of its processes runs, so that borrowers
  // cannot take memory an admitted pod was promised, and keeps it held (the tenant's entry kept)
  // until withdrawn. Idempotent. Refused with one line when the requests held on the GPU would
  // exceed its memory, or when running processes of the tenant hold another share there. When
  // borrowers hold memory the request needs, it is held all the same — borrowers can then only
  // give back, and what they free is the tenant's — and *warning says who they are.
  Status AnnounceRequest(const std::string& tenant, const uint8_t (&uuid)[16], uint64_t device_total_bytes,
                         MemoryShare share, MemoryAnnouncer by, std::string* warning);
  // Ends `by`'s announcement (the tenant's running processes, if any, hold the request until
  // they end). Nothing announced: Ok.
  Status WithdrawRequest(const std::string& tenant, const uint8_t (&uuid)[16], MemoryAnnouncer by);
  // What `by` has announced and not withdrawn.
  std::vector<AnnouncedRequest> Announced(MemoryAnnouncer by) const;

  // After fork(): the child is not the parent's process and must not keep its liveness lock.
  void ForgetAfterFork();

  const std::string& path() const;

  // For the compute scheduler (broker/scheduler.h), which works on the same segment.
  Segment* segment() const;
  // This process's slot and tenant; nullopt until Register (and after Unregister).
  std::optional<ProcessSlot> slot() const { return ProcessSlot::From(slot_.load()); }
  std::optional<TenantIndex> tenant() const { return TenantIndex::From(tenant_); }
  // True while the process in `slot` holds its liveness lock (any PID namespace).
  bool IsProcessAlive(ProcessSlot slot) const;

 private:
  explicit Broker(std::unique_ptr<SegmentFile> file);
  // Makes sure the liveness descriptor is this process's own (a forked child shares its parent's
  // open file description, and with it the parent's locks): reopens it, forgetting a registration
  // inherited from the parent, when it is not.
  Status UseOwnDescriptor();
  // This process is registered, of the ledger's tenant, and has the ledger's GPU open.
  bool OwnsLedger(LedgerId ledger) const;
  // False when this process's slot was reaped although it lives: it closed the descriptor holding
  // its liveness lock. Checked under the ledger mutex before every charge.
  bool StillRegistered() const;
  bool TryCharge(LedgerId ledger, uint64_t bytes);
  // OpenLedger's part under the ledger's lock: sets or checks the tenant's share, holds its request.
  Status OpenLocked(LedgerId ledger, MemoryShare share, bool already_open);
  // With the ledger's lock held: clears a suspect mark this process had (saying so) and credits
  // the frees it could not credit while the lock was not to be had (ledger.h, LedgerHealth).
  void SettleLocked(LedgerId ledger);

  std::unique_ptr<SegmentFile> file_;
  // This process's slot, -1 until Register (read through slot(), which checks it). Atomic: the
  // shim's compute monitor thread reads it (IsProcessAlive) while the exiting thread unregisters.
  std::atomic<int> slot_{-1};
  int tenant_ = -1;          // this process's tenant index, -1 until Register (read through tenant())
  uint64_t generation_ = 0;  // the slot's generation at Register: a changed one means it was lost
  // The ledger locks this process could not take, and the frees it owes them.
  std::unique_ptr<LedgerHealth> health_;
};

}  // namespace gpuslice::broker
