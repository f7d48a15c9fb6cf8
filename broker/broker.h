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
  // Returns the ledger index for Reserve/Release.
  Result<int> OpenLedger(const uint8_t (&uuid)[16], uint64_t device_total_bytes, MemoryShare share);
  // A quota alone: a limit without a request.
  Result<int> OpenLedger(const uint8_t (&uuid)[16], uint64_t device_total_bytes, uint64_t quota) {
    return OpenLedger(uuid, device_total_bytes, MemoryShare{0, quota});
  }

  // Reserve-then-allocate: atomically charges `bytes` to the tenant and this process if the
  // tenant stays within its limit and, above its request, within the memory no other tenant's
  // request reserves (broker/memory_requests.h); false otherwise (dead processes are reaped and
  // the check retried once before refusing). Concurrent reservations of every process of every
  // tenant can never break either rule, not even momentarily.
  bool Reserve(int ledger, uint64_t bytes);
  // Returns bytes reserved by this process (a rolled-back reservation or a free).
  void Release(int ledger, uint64_t bytes);

  // This process's tenant's ledger on the GPU with `uuid` if some process of the tenant opened
  // it, else -1. Read-only (for views such as NVML's that must not set a quota).
  int FindLedger(const uint8_t (&uuid)[16]) const;

  uint64_t Used(int ledger) const;
  uint64_t Quota(int ledger) const;  // the limit
  uint64_t Request(int ledger) const;
  // What the tenant could still reserve on the GPU of `ledger` now: what is left of its request,
  // or, when more, what it may borrow, within its limit (lock-free reads: a figure at rest).
  uint64_t Available(int ledger) const;
  // What every tenant of this state directory holds on the GPU of `ledger`, summed (lock-free
  // reads: a figure at rest, for the unaccounted-memory warning of broker/unaccounted.h).
  uint64_t GpuUsed(int ledger) const;
  // The live processes of this state directory that use the GPU of `ledger` (this one included).
  int GpuProcesses(int ledger) const;

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
  int slot() const { return slot_; }
  int tenant() const { return tenant_; }
  // True while the process in `slot` holds its liveness lock (any PID namespace).
  bool IsProcessAlive(int slot) const;

 private:
  explicit Broker(std::unique_ptr<SegmentFile> file);
  // Makes sure the liveness descriptor is this process's own (a forked child shares its parent's
  // open file description, and with it the parent's locks): reopens it, forgetting a registration
  // inherited from the parent, when it is not.
  Status UseOwnDescriptor();
  bool OwnsLedger(int ledger) const;
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
  // This process's slot, -1 until Register. Atomic: the shim's compute monitor thread reads it
  // (IsProcessAlive) while the exiting thread unregisters.
  std::atomic<int> slot_{-1};
  int tenant_ = -1;          // this process's tenant index
  uint64_t generation_ = 0;  // the slot's generation at Register: a changed one means it was lost
  // The ledger locks this process could not take, and the frees it owes them.
  std::unique_ptr<LedgerHealth> health_;
};

// --- read-only view for gpuslicectl ---

struct ProcessView {
  int pid = 0;           // as the process saw itself (may be another PID namespace's)
  uint64_t charged = 0;  // bytes it holds on this GPU
};

struct TenantView {
  std::string name;
  uint64_t quota = kUnlimited;  // the memory limit
  uint64_t used = 0;
  uint64_t request = 0;                                // memory guaranteed; 0: none (used beyond it is borrowed)
  MemoryAnnouncer announced = MemoryAnnouncer::kNone;  // who holds the request for it, beside its processes
  uint64_t borrowed() const { return used > request ? used - request : 0; }
  std::vector<ProcessView> processes;  // live processes with a charge or registered on the GPU
  // Compute share (broker/scheduler.h). 0 = not set yet: the tenant's first process sets both at
  // its first kernel launch on the GPU (GPUSLICE_COMPUTE_REQUEST / GPUSLICE_COMPUTE_LIMIT).
  uint32_t request_pct = 0;
  uint32_t limit_pct = 0;
  uint32_t waiting = 0;        // its processes waiting for the grant, now (a fresh waiting stamp)
  uint32_t compute_class = 0;  // ComputeClass (segment_layout.h): 0 standard, 1 latency, 2 background
  uint64_t service_ns = 0;     // device time granted to it so far
  // Counters since its ledger was created: grants received, waits for the grant and their total
  // time, allocations refused over its quota.
  uint64_t grants_received = 0;
  uint64_t waits = 0;
  uint64_t wait_ns = 0;
  uint64_t refused_allocations = 0;
  uint64_t refused_bytes = 0;  // their sizes, summed
  // Waits by duration: wait_buckets[i] counts waits of at most kWaitBucketsNs[i] and more than
  // the bucket before (segment_layout.h); the last counts every longer wait. Not cumulative.
  uint64_t wait_buckets[18] = {};
  // Its share of the GPU's time over the last complete measurement window, in parts per million;
  // meaningful only when the GPU's share_window_complete is true.
  uint64_t last_share_ppm = 0;
};

struct GpuView {
  std::string uuid;  // "GPU-..."
  uint64_t total_memory = 0;
  std::vector<TenantView> tenants;
  // Compute policy, as gpuslicectl set wrote it.
  uint32_t mode = 0;        // SharingMode (segment_layout.h): 0 timeslice, 1 none, 2 mps
  uint64_t quantum_ns = 0;  // 0 = the built-in default (kDefaultQuantumNs)
  uint64_t budget_ns = 0;   // 0 = the built-in default (kDefaultBudgetNs)
  // The grant, as it stood when read (lock-free: a consistent picture only at rest).
  std::string holder;    // name of the tenant holding the GPU; "" = nobody
  bool closing = false;  // the holder is draining to hand the GPU on
  uint32_t waiting = 0;  // processes of any tenant waiting for the grant
  uint64_t grants = 0;   // grants made since the GPU entry was created
  // Where the device's time went at hand-overs, summed since the GPU entry was created
  // (GpuEntry's counters, docs/performance.md): grant start to its holder's first launch, the
  // rest of the time holders had nothing in flight, gate closed to hand-over, nobody holding
  // the GPU while tenants over their limits waited.
  uint64_t grant_start_idle_ns = 0;
  uint64_t holder_idle_ns = 0;
  uint64_t drain_ns = 0;
  uint64_t unheld_waiting_ns = 0;
  // Shares are measured over windows of at least 10 s, rolled at hand-overs. window_start_ns is
  // when the current window began (CLOCK_MONOTONIC), i.e. when the last complete one ended; 0
  // before the first grant. share_window_complete: at least one window has completed, so the
  // tenants' last_share_ppm are measurements (before that they read 0 and mean nothing).
  uint64_t window_start_ns = 0;
  bool share_window_complete = false;
};

struct Snapshot {
  std::string path;
  uint32_t layout_version = 0;
  uint64_t taken_ns = 0;  // CLOCK_MONOTONIC when read (to age window_start_ns)
  std::vector<GpuView> gpus;
  uint64_t ledger_repairs = 0;    // ledgers repaired after a process died holding their lock
  uint64_t processes_reaped = 0;  // dead processes whose charges were returned
};

// Reads the segment in state_dir after reaping dead processes. An error when it is missing or
// incompatible.
Result<Snapshot> TakeSnapshot(const std::string& state_dir);
// The same view through a read-only mapping that never reaps or locks (gpuslice-exporter): the
// charges of processes that died since the last reap still count until some writer reaps them.
Result<Snapshot> TakeReadOnlySnapshot(const std::string& state_dir);

// "GPU-xxxxxxxx-xxxx-..." <-> 16 bytes.
std::string FormatUuid(const uint8_t (&uuid)[16]);
bool ParseUuid(const std::string& text, uint8_t (&uuid)[16]);

}  // namespace gpuslice::broker
