// What the segment holds, read as plain values for the tools (gpuslicectl status and top, the
// exporter): per GPU, each tenant's memory ledger, its compute share and counters, and the live
// processes that charge it. A snapshot is a copy: it owns nothing in the segment and stays valid
// after the segment changes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "broker/memory_share.h"
#include "common/status.h"

namespace gpuslice::broker {

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

}  // namespace gpuslice::broker
