// The broker's shared segment: one fixed-layout file, <state dir>/gpuslice.state, mapped by every
// process of every tenant on the node (docs/broker.md has the same layout as a table).
//
// Layout rules (iceoryx-style): fixed-size arrays of trivially copyable fields and lock-free
// atomics of at most 64 bits, no pointers, no offsets that depend on the build. A process may be
// SIGKILLed between any two stores, so every multi-word update is either done under a robust
// mutex whose next owner repairs it, or published by one final store (an entry's `state`, the
// header's `magic`).
//
// Version rule: ANY change to a struct below — a field added, removed, reordered, resized or given
// a new meaning — bumps kLayoutVersion. tests/broker/broker_layout_test.cc pins every size and
// offset, so a change cannot go unnoticed. A process that finds another magic, version or size
// refuses the file (fail closed); it is never migrated in place.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "broker/compute_class.h"
#include "common/robust_mutex.h"

namespace gpuslice::broker {

inline constexpr uint64_t kMagic = 0x31524B4253435047ULL;  // "GPCSBKR1" little-endian
inline constexpr uint32_t kLayoutVersion = 12;             // 2: compute time-slicing; 3: in-flight tracking, leases,
                                                           // classes, per-process waiting, counters; 4: 128 GPUs
                                                           // (open_gpus a 128-bit mask), ledger mutexes set up lazily,
                                                           // a grant's overlap with others' charged time, grants
                                                           // charged by their holder's busy time; 5: 18 wait
                                                           // buckets, 50 us to 10 s; 6: where the device's time
                                                           // went at hand-overs (GpuEntry's idle counters); 7:
                                                           // ProcessGpuState::inflight counts launching threads
                                                           // and, apart, launches queued beyond them; 8:
                                                           // LedgerEntry::back_from_idle; 9: memory requests
                                                           // (LedgerEntry::request and ::announced,
                                                           // GpuEntry::memory_mutex, ::request_ledgers); 10:
                                                           // GpuEntry::holder_reported_ns; 11:
                                                           // GpuEntry::queue_drain_at_ns; 12:
                                                           // GpuEntry::tail_busy_at_since_ns
inline constexpr char kStateFileName[] = "gpuslice.state";

// Distinct GPU UUIDs, MIG instances counting apiece: a 16-GPU node with seven instances on every
// GPU, and the 16 parents, is 128. The tables of GPUs x tenants and GPUs x processes grow with it;
// docs/broker.md ("Size") says how little of them a node actually touches.
inline constexpr int kMaxGpus = 128;
inline constexpr int kMaxTenants = 256;
inline constexpr int kMaxProcesses = 1024;
inline constexpr int kTenantNameBytes = 64;                 // names of at most 63 bytes, NUL-terminated
inline constexpr int kMaxLedgers = kMaxTenants * kMaxGpus;  // ledger index = tenant * kMaxGpus + gpu
inline constexpr int kGpuMaskWords = kMaxGpus / 64;         // a bit per GPU, in u64 words
static_assert(kMaxGpus % 64 == 0, "open_gpus holds whole words");

// A registered process holds an OFD write lock on byte kLivenessLockBase + slot of the state file
// for as long as it lives (common/process_lock.h). The bytes lie far past the end of the file.
inline constexpr uint64_t kLivenessLockBase = 1ULL << 32;

// pthread_mutex_t is 40 bytes on x86-64 glibc and 48 on aarch64; a fixed 48-byte slot keeps the
// layout identical on both.
inline constexpr size_t kMutexSlotBytes = 48;
struct MutexSlot {
  RobustMutex mutex;
  uint8_t padding[kMutexSlotBytes - sizeof(RobustMutex)];
};
static_assert(sizeof(RobustMutex) <= kMutexSlotBytes, "pthread_mutex_t outgrew its slot");

enum class EntryState : uint32_t {
  kFree = 0,   // unused (or abandoned halfway by a process that died while claiming it)
  kInUse = 1,  // published: every other field of the entry is valid
};

struct SegmentHeader {
  uint64_t magic;           // kMagic, stored last by the creator
  uint32_t layout_version;  // kLayoutVersion
  uint32_t header_size;     // sizeof(SegmentHeader)
  uint64_t segment_size;    // sizeof(Segment) == the file's size
  uint64_t created_ns;      // CLOCK_MONOTONIC when created (informational)
  uint32_t max_gpus;        // the table capacities the creator built: must equal
  uint32_t max_tenants;     // this build's constants
  uint32_t max_processes;
  uint32_t tenant_name_bytes;
  // High-water marks: entries at or past them have never been used, so scans stop there. Raised
  // (under table_mutex) before an entry is claimed; never lowered.
  std::atomic<uint32_t> gpu_high_water;
  std::atomic<uint32_t> tenant_high_water;
  std::atomic<uint32_t> process_high_water;
  uint32_t reserved;
  // Guards claiming and freeing GPU, tenant and process entries, and reaping. Lock order: the
  // table mutex before any ledger mutex, never the other way round.
  MutexSlot table_mutex;
  // Diagnostics (gpuslicectl): ledgers repaired after their holder died, dead processes reaped.
  std::atomic<uint64_t> ledger_repairs;
  std::atomic<uint64_t> processes_reaped;
};

enum class SharingMode : uint32_t {
  kTimeslice = 0,  // gpuslice grants the GPU to one tenant at a time, in weighted fair quanta
  kNone = 1,       // memory quotas only: no gating of launches
  kMps = 2,        // no gating: MPS shares the SMs (the shim passes the limits to MPS)
};

// One physical GPU (or MIG instance), keyed by its 16-byte UUID. The second half is the compute
// scheduler's state (broker/scheduler.h, docs/scheduling.md).
struct alignas(64) GpuEntry {
  std::atomic<uint32_t> state;  // EntryState
  // The previous holder (tenant + 1) whose last kernel still runs beside the current grant (a
  // yield to a waiter owed the GPU does not wait for it); 0: none. Under sched_mutex.
  std::atomic<uint32_t> tail_holder;
  std::atomic<uint64_t> total_memory;  // bytes, as the driver reports it
  std::atomic<uint64_t> uuid[2];       // the UUID's 16 bytes, in order
  // Policy, set by gpuslicectl (0 = the default).
  std::atomic<uint32_t> mode;  // SharingMode
  // 1 while a latency-class process may have priority work on the GPU (a hint: each process's
  // own priority_until_ns is the truth; whoever finds them all expired clears it).
  std::atomic<uint32_t> priority;
  std::atomic<uint64_t> quantum_ns;
  // The grant. Read lock-free on every gated launch; changed under sched_mutex.
  std::atomic<uint32_t> holder;            // tenant index + 1 holding the GPU; 0 = nobody
  std::atomic<uint32_t> closing;           // 1: the holder must stop launching and drain
  std::atomic<uint32_t> grant_seq;         // futex word, bumped at every change waiters care about
  std::atomic<uint32_t> waiting;           // processes waiting, as counted at the last decision
  std::atomic<uint64_t> grant_start_ns;    // CLOCK_MONOTONIC when the holder got the grant
  std::atomic<uint64_t> vclock;            // virtual time of the last grant (bounds idle credit)
  std::atomic<uint64_t> grants;            // grants made (diagnostics)
  std::atomic<uint64_t> window_start_ns;   // the current measurement window (status shares)
  std::atomic<uint64_t> budget_ns;         // policy: work a holder may keep queued (0 = default)
  std::atomic<uint64_t> holder_active_ns;  // the holder was last seen with work: what it is charged to
  std::atomic<uint64_t> last_decision_ns;  // the last grant decision: waiters leave the next to others
  std::atomic<uint64_t> tail_since_ns;     // when tail_holder's grant passed on
  // Time within the current grant already charged to others (latency work beside it, the share of
  // the previous holder's tail): the holder is not charged for it again.
  std::atomic<uint64_t> overlap_ns;
  // The holder's processes' busy time (ProcessGpuState::busy_total_ns and any open period) when it
  // got the grant: its grant is charged by how much that grew, not by the grant's wall time.
  std::atomic<uint64_t> holder_busy_at_grant_ns;
  // Where the device's time went while tenants wanted it: what gpuslice-bench breaks the device
  // time lost to the scheduler down by (docs/performance.md). Counters are summed at hand-overs.
  std::atomic<uint64_t> first_work_ns;        // the holder's first launch in its grant (0: none yet)
  std::atomic<uint64_t> closed_at_ns;         // when the holder's gate closed for a reason (0: open)
  std::atomic<uint64_t> grant_start_idle_ns;  // grant start to the holder's first launch (the hand-over's cost)
  std::atomic<uint64_t> holder_idle_ns;       // the rest of the time a holder had nothing in flight
  std::atomic<uint64_t> drain_ns;             // gate closed to hand-over (the holder's queue still runs)
  std::atomic<uint64_t> unheld_waiting_ns;    // nobody held the GPU while a tenant waited (over its limit)
  MutexSlot sched_mutex;                      // guards grant decisions and every virtual time
  // Taken (after the tenant's ledger mutex) by whatever makes a tenant hold more of the GPU than
  // its request, or makes a request held (broker/memory_requests.h): those are decided one at a
  // time per GPU. Guards no field: the figures it decides on are read from the ledgers.
  MutexSlot memory_mutex;
  // How many ledgers on this GPU have a memory request: raised before a request is stored, lowered
  // after one is cleared, so that it may read high (a holder killed in between) but never low.
  // While it is 0 an allocation is checked against no one (broker/memory_requests.h).
  std::atomic<uint32_t> request_ledgers;
  // How much of the current grant's charge is already in the holder's service_ns: a long grant is
  // counted as it runs, not in one lump at its hand-over. Under sched_mutex; 0 at each hand-over.
  std::atomic<uint64_t> holder_reported_ns;
  // Beside a latency tenant: when the work the other tenants' processes have queued on the GPU is
  // predicted to have run, all of it one kernel after another (shim/queue_drain_prediction.h). A
  // process launches only while it is at most 1 ms ahead, and moves it on by one kernel as it
  // does, so that a request waits for one co-runner kernel and 1 ms, not one per process. A
  // prediction in CLOCK_MONOTONIC ns, lock-free: a dead process's value is in the past a kernel
  // later.
  std::atomic<uint64_t> queue_drain_at_ns;
  // tail_holder's processes' busy time when its grant passed on (tail_since_ns): how many of its
  // contexts had work beside the next holder's, which sets its turn of the time they overlapped.
  std::atomic<uint64_t> tail_busy_at_since_ns;
};

struct TenantEntry {
  std::atomic<uint32_t> state;  // EntryState
  uint32_t name_length;
  char name[kTenantNameBytes];  // written only while state is kFree
};

// What one tenant may use and uses on one GPU. `used` equals the sum of charged[gpu] over the
// registered processes of the tenant whenever the mutex is free and consistent; the next locker
// after an owner died recomputes it from those charges (docs/broker.md, "ledger rules").
struct alignas(64) LedgerEntry {
  std::atomic<uint64_t> used;           // bytes reserved by the tenant's processes
  std::atomic<uint64_t> quota;          // bytes; UINT64_MAX = unlimited
  MutexSlot mutex;                      // guards used, quota, state and every charged[gpu]
  std::atomic<uint32_t> state;          // EntryState: kInUse once a first process set the quota
  std::atomic<uint32_t> compute_class;  // ComputeClass, set with request and limit
  // Compute share on this GPU (changed under the GPU's sched_mutex).
  std::atomic<uint32_t> request_pct;  // entitlement and weight, 1..100 (0: not set yet)
  std::atomic<uint32_t> limit_pct;    // ceiling, 1..100
  std::atomic<uint32_t> waiting;      // its processes waiting, as counted at the last decision
  // 1 while it waits having re-entered a whole credit behind the system (back from idle; cleared
  // when it is granted the GPU): owed the GPU at the larger of its and the holder's weight.
  std::atomic<uint32_t> back_from_idle;
  std::atomic<uint64_t> vtime;              // virtual time: service / weight (scaled)
  std::atomic<uint64_t> service_ns;         // device time granted so far
  std::atomic<int64_t> tokens_ns;           // limit bucket: time it may still hold the GPU
  std::atomic<uint64_t> tokens_at_ns;       // when the bucket was last refilled
  std::atomic<uint64_t> window_service_ns;  // service_ns at the start of the GPU's window
  std::atomic<uint64_t> last_share_ppm;     // share of the last complete window, parts per million
  // Latency class: priority bucket (fills at request % of real time); while it holds time the
  // tenant's launches pass the grant.
  std::atomic<int64_t> priority_tokens_ns;
  std::atomic<uint64_t> priority_tokens_at_ns;
  // Counters (gpuslicectl, exporter): only ever increased, by atomic adds that a SIGKILL cannot
  // tear. Waits are bucketed by kWaitBucketsNs (an implicit last bucket above the largest).
  std::atomic<uint64_t> refused_allocations;
  std::atomic<uint64_t> refused_bytes;
  std::atomic<uint64_t> grants_received;
  std::atomic<uint64_t> waits;
  std::atomic<uint64_t> wait_ns;
  std::atomic<uint64_t> wait_buckets[18];
  // Memory guaranteed to the tenant on this GPU (GPUSLICE_MEMORY_REQUEST; 0: none), beside the
  // ceiling `quota`. Set with the quota, under the mutex. What it reserves: broker/memory_requests.h.
  std::atomic<uint64_t> request;
  // Who told the node of the request before any process of the tenant ran (MemoryAnnouncer; 0:
  // nobody): while set, the request is held whether or not a process has the ledger open, and
  // the tenant's entry is not recycled. One store sets or clears it, under the mutex.
  std::atomic<uint32_t> announced;
  uint32_t reserved;
};

// Upper bounds of the wait histogram's buckets, 50 µs to 10 s in steps of 1, 2.5, 5 (a wait is
// a few quanta at most when all is well, seconds when it is not: both must be resolved; the
// eight buckets of layout 4 put a latency tenant's 0.1-0.6 s waits in one, 0.1 s to 1 s); the
// eighteenth counts every longer wait.
inline constexpr uint64_t kWaitBucketsNs[17] = {50'000,        100'000,       250'000,     500'000,       1'000'000,
                                                2'500'000,     5'000'000,     10'000'000,  25'000'000,    50'000'000,
                                                100'000'000,   250'000'000,   500'000'000, 1'000'000'000, 2'500'000'000,
                                                5'000'000'000, 10'000'000'000};
static_assert(std::extent_v<decltype(kWaitBucketsNs)> + 1 == std::extent_v<decltype(LedgerEntry::wait_buckets)>);

// ComputeClass (LedgerEntry::compute_class's values): broker/compute_class.h.

// What one process does on one GPU, written by the process itself (launching threads and its
// monitor) and read by every scheduler decision. Times are CLOCK_MONOTONIC nanoseconds.
struct ProcessGpuState {
  // Zero exactly when the process has no launch in flight (QueuedLaunches tells about how many):
  // bits 0-15 count its launching threads with launches in flight (a thread's first launch
  // after idle adds 1, the completion of its last takes it off, so the launch path writes it
  // once per busy period, not per launch); bits 16-30, set by its monitor at each poll, the
  // launches queued beyond one per such thread; kUntrackedWork set: work launched while
  // untracked (the tenant was alone), of unknown extent until the monitor confirms the GPU
  // finished it.
  std::atomic<uint32_t> inflight;
  std::atomic<uint32_t> grace_ns;           // how long inflight must stay 0 before it counts as idle
  std::atomic<uint64_t> idle_since_ns;      // when inflight last became 0
  std::atomic<uint64_t> heartbeat_ns;       // renewed by its monitor: a stale one is stopped or stuck
  std::atomic<uint64_t> waiting_ns;         // 0, or renewed by its threads waiting for the grant
  std::atomic<uint64_t> priority_until_ns;  // latency class: its launches pass the grant until then
  std::atomic<uint64_t> busy_since_ns;      // when inflight last became non-zero (or work went untracked)
  // Time it had work in flight, summed over its busy periods that ended (untracked work counts as
  // in flight from its first launch to its confirmation): what its tenant's grants are charged by.
  std::atomic<uint64_t> busy_total_ns;
};
inline constexpr uint32_t kUntrackedWork = 1u << 31;
inline constexpr uint32_t kInflightThreadsMask = 0xFFFF;
inline constexpr uint32_t kInflightExtraShift = 16;
inline constexpr uint32_t kInflightExtraMax = 0x7FFF;
// About how many launches a ProcessGpuState::inflight word stands for (without kUntrackedWork).
inline uint32_t QueuedLaunches(uint32_t inflight) {
  return (inflight & kInflightThreadsMask) + ((inflight >> kInflightExtraShift) & kInflightExtraMax);
}

enum class ProcessState : uint32_t {
  kFree = 0,
  kRegistered = 1,  // claimed by a process that holds (or held, if it died) its liveness lock
};

struct alignas(64) ProcessEntry {
  std::atomic<uint32_t> state;  // ProcessState
  std::atomic<int32_t> pid;     // as the process saw itself: informational only
  std::atomic<int32_t> tenant;  // tenant index while registered
  uint32_t reserved;
  std::atomic<uint64_t> generation;  // bumped at every claim: lock-free readers detect reuse
  std::atomic<uint64_t> started_ns;  // CLOCK_MONOTONIC at registration
  // Bit g % 64 of word g / 64: the process opened its tenant's ledger on GPU g. Each bit is set
  // and cleared by one atomic operation on its word (broker/checked_index.h: IsGpuOpen...).
  std::atomic<uint64_t> open_gpus[kGpuMaskWords];
  // Bytes this process holds on each GPU; changed only under that GPU's ledger mutex of its tenant.
  std::atomic<uint64_t> charged[kMaxGpus];
  // Its scheduling state on each GPU (broker/scheduler.h); zeroed when the slot is claimed.
  ProcessGpuState sched[kMaxGpus];
};

// The file is created sparse and is mostly never touched: an entry past its table's high-water
// mark is zero bytes nobody reads. So that this holds for the ledgers too, the mutex of tenant t's
// ledger on GPU g is initialised once both t and g have been claimed, not when the file is
// created (broker/tables.cc); a tenant's ledgers lie side by side.
struct Segment {
  SegmentHeader header;
  GpuEntry gpus[kMaxGpus];
  TenantEntry tenants[kMaxTenants];
  ProcessEntry processes[kMaxProcesses];
  LedgerEntry ledgers[kMaxLedgers];
};

static_assert(std::is_standard_layout_v<Segment>, "offsets must be well defined");
static_assert(std::atomic<uint64_t>::is_always_lock_free);
static_assert(std::atomic<uint32_t>::is_always_lock_free);
static_assert(std::atomic<int32_t>::is_always_lock_free);

}  // namespace gpuslice::broker
