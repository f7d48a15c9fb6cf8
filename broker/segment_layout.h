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
// a new meaning — bumps kLayoutVersion. tests/broker_layout_test.cc pins every size and offset, so
// a change cannot go unnoticed. A process that finds another magic, version or size refuses the
// file (fail closed); it is never migrated in place.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "common/robust_mutex.h"

namespace gpuslice::broker {

inline constexpr uint64_t kMagic = 0x31524B4253435047ULL;  // "GPCSBKR1" little-endian
inline constexpr uint32_t kLayoutVersion = 1;
inline constexpr char kStateFileName[] = "gpuslice.state";

inline constexpr int kMaxGpus = 16;            // distinct GPU UUIDs (MIG instances count apiece)
inline constexpr int kMaxTenants = 256;
inline constexpr int kMaxProcesses = 1024;
inline constexpr int kTenantNameBytes = 64;    // names of at most 63 bytes, NUL-terminated
inline constexpr int kMaxLedgers = kMaxTenants * kMaxGpus;  // ledger index = tenant * kMaxGpus + gpu

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
  uint64_t magic;                          // kMagic, stored last by the creator
  uint32_t layout_version;                 // kLayoutVersion
  uint32_t header_size;                    // sizeof(SegmentHeader)
  uint64_t segment_size;                   // sizeof(Segment) == the file's size
  uint64_t created_ns;                     // CLOCK_MONOTONIC when created (informational)
  uint32_t max_gpus;                       // the table capacities the creator built: must equal
  uint32_t max_tenants;                    // this build's constants
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

// One physical GPU (or MIG instance), keyed by its 16-byte UUID.
struct GpuEntry {
  std::atomic<uint32_t> state;             // EntryState
  uint32_t reserved;
  std::atomic<uint64_t> total_memory;      // bytes, as the driver reports it
  std::atomic<uint64_t> uuid[2];           // the UUID's 16 bytes, in order
};

struct TenantEntry {
  std::atomic<uint32_t> state;             // EntryState
  uint32_t name_length;
  char name[kTenantNameBytes];             // written only while state is kFree
};

// What one tenant may use and uses on one GPU. `used` equals the sum of charged[gpu] over the
// registered processes of the tenant whenever the mutex is free and consistent; the next locker
// after an owner died recomputes it from those charges (docs/broker.md, "ledger rules").
struct alignas(64) LedgerEntry {
  std::atomic<uint64_t> used;              // bytes reserved by the tenant's processes
  std::atomic<uint64_t> quota;             // bytes; UINT64_MAX = unlimited
  MutexSlot mutex;                         // guards used, quota, state and every charged[gpu]
  std::atomic<uint32_t> state;             // EntryState: kInUse once a first process set the quota
  uint32_t reserved;
};

enum class ProcessState : uint32_t {
  kFree = 0,
  kRegistered = 1,  // claimed by a process that holds (or held, if it died) its liveness lock
};

struct alignas(64) ProcessEntry {
  std::atomic<uint32_t> state;             // ProcessState
  std::atomic<int32_t> pid;                // as the process saw itself: informational only
  std::atomic<int32_t> tenant;             // tenant index while registered
  std::atomic<uint32_t> open_gpus;         // bit g: the process opened its tenant's ledger on GPU g
  std::atomic<uint64_t> generation;        // bumped at every claim: lock-free readers detect reuse
  std::atomic<uint64_t> started_ns;        // CLOCK_MONOTONIC at registration
  // Bytes this process holds on each GPU; changed only under that GPU's ledger mutex of its tenant.
  std::atomic<uint64_t> charged[kMaxGpus];
};

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
