// TakeSnapshot: the read-mostly view for gpuslicectl. It reaps first (so the figures exclude
// dead processes) and reads under the table mutex, so no entry is claimed or recycled mid-read.
// Without write permission (the exporter's read-only snapshot) it reads the atomics as they are,
// unreaped and unlocked, and leaves out the processes that hold no liveness lock any more (dead,
// not yet reaped): their charges are not counted in their tenant's used memory, which is what a
// reap will make of it.
#include <algorithm>
#include <cstring>
#include <iterator>
#include <optional>

#include "broker/checked_index.h"
#include "broker/grant_policy.h"
#include "broker/ledger.h"
#include "broker/lock_fault.h"
#include "broker/sched_terms.h"
#include "broker/segment_file.h"
#include "broker/snapshot.h"
#include "broker/tables.h"
#include "broker/uuid.h"
#include "common/clock.h"
#include "common/printable.h"
#include "common/process_lock.h"
#include "common/robust_mutex.h"

namespace gpuslice::broker {
namespace {

constexpr uint32_t kInUse = static_cast<uint32_t>(EntryState::kInUse);
constexpr uint32_t kRegistered = static_cast<uint32_t>(ProcessState::kRegistered);

// As a person will read it (common/printable.h): the bytes are anyone's.
std::string Name(const TenantEntry& entry) { return Printable(std::string_view(entry.name, NameLength(entry))); }

// `liveness_fd` >= 0: the segment was not reaped; test each process's liveness lock through it.
TenantView ViewTenant(const Segment& segment, TenantIndex tenant, GpuIndex gpu, int liveness_fd) {
  const TenantEntry& entry = At(segment, tenant);
  const LedgerEntry& ledger = At(segment, LedgerId::Of(tenant, gpu));
  TenantView view;
  view.name = Name(entry);
  view.quota = ledger.quota.load();
  view.used = ledger.used.load();
  view.request = ledger.request.load();
  view.announced = static_cast<MemoryAnnouncer>(ledger.announced.load());
  view.request_pct = ledger.request_pct.load();
  view.limit_pct = ledger.limit_pct.load();
  view.waiting = 0;
  view.service_ns = ledger.service_ns.load();
  view.compute_class = ledger.compute_class.load();
  view.grants_received = ledger.grants_received.load();
  view.waits = ledger.waits.load();
  view.wait_ns = ledger.wait_ns.load();
  view.refused_allocations = ledger.refused_allocations.load();
  view.refused_bytes = ledger.refused_bytes.load();
  for (size_t i = 0; i < std::size(view.wait_buckets); ++i) view.wait_buckets[i] = ledger.wait_buckets[i].load();
  view.last_share_ppm = ledger.last_share_ppm.load();
  for (ProcessSlot p : UsedProcessSlots(segment)) {
    const ProcessEntry& process = At(segment, p);
    if (process.state.load() != kRegistered || process.tenant.load() != tenant.value()) continue;
    const uint64_t charged = At(process.charged, gpu).load();
    if (charged == 0 && !IsGpuOpen(process, gpu)) continue;
    if (liveness_fd >= 0 && !IsByteLockedByOther(liveness_fd, kLivenessLockBase + static_cast<uint64_t>(p.value()))) {
      view.used -= std::min(view.used, charged);  // dead, not reaped yet: a reap returns it
      continue;
    }
    // Waiting now: its waiting stamp is within the lease (a stale one is a stopped or dead waiter).
    const uint64_t stamp = At(process.sched, gpu).waiting_ns.load();
    const uint64_t now = MonotonicNanos();
    if (stamp != 0 && (stamp >= now || now - stamp < LeaseOf(At(segment, gpu)))) ++view.waiting;
    view.processes.push_back(ProcessView{process.pid.load(), charged});
  }
  return view;
}

bool TenantHasRegisteredProcess(const Segment& segment, TenantIndex tenant) {
  for (ProcessSlot p : UsedProcessSlots(segment)) {
    const ProcessEntry& process = At(segment, p);
    if (process.state.load() == kRegistered && process.tenant.load() == tenant.value()) return true;
  }
  return false;
}

void Fill(const Segment& segment, int liveness_fd, Snapshot* out) {
  out->layout_version = segment.header.layout_version;
  out->taken_ns = MonotonicNanos();
  out->ledger_repairs = segment.header.ledger_repairs.load();
  out->processes_reaped = segment.header.processes_reaped.load();
  const IndexRange<TenantIndex> tenants = UsedTenants(segment);
  for (GpuIndex g : UsedGpus(segment)) {
    const GpuEntry& gpu = At(segment, g);
    if (gpu.state.load() != kInUse) continue;
    uint64_t words[2] = {gpu.uuid[0].load(), gpu.uuid[1].load()};
    uint8_t uuid[16];
    std::memcpy(uuid, words, sizeof uuid);
    GpuView view;
    view.uuid = FormatUuid(uuid);
    view.total_memory = gpu.total_memory.load();
    view.mode = gpu.mode.load();
    view.quantum_ns = gpu.quantum_ns.load();
    view.budget_ns = gpu.budget_ns.load();
    view.closing = gpu.closing.load() != 0;
    view.waiting = 0;  // summed over its tenants below
    view.grants = gpu.grants.load();
    view.grant_start_idle_ns = gpu.grant_start_idle_ns.load();
    view.holder_idle_ns = gpu.holder_idle_ns.load();
    view.drain_ns = gpu.drain_ns.load();
    view.unheld_waiting_ns = gpu.unheld_waiting_ns.load();
    view.window_start_ns = gpu.window_start_ns.load();
    // A holder none of whose processes is registered any more (the last one died, or exited
    // without handing the grant on) holds nothing: the next decision, by whoever next looks,
    // hands the grant on. It is shown as no holder rather than as a tenant that is gone.
    if (const auto holder = HolderOf(gpu); holder && holder->value() < tenants.size() &&
                                           At(segment, *holder).state.load() == kInUse &&
                                           TenantHasRegisteredProcess(segment, *holder)) {
      view.holder = Name(At(segment, *holder));
    }
    for (TenantIndex t : tenants) {
      if (At(segment, t).state.load() != kInUse) continue;
      const LedgerEntry& ledger = At(segment, LedgerId::Of(t, g));
      if (ledger.state.load() != kInUse) continue;
      // Only a roll that ends a window writes last_share_ppm, and a window (10 s or more, rolled
      // at a hand-over) always has a holder, whose share is then not 0. window_service_ns says
      // nothing: the first roll, at the GPU's first grant, sets it to the service so far, which
      // a latency tenant served before that grant already has.
      if (view.window_start_ns != 0 && ledger.last_share_ppm.load() != 0) view.share_window_complete = true;
      view.tenants.push_back(ViewTenant(segment, t, g, liveness_fd));
      view.waiting += view.tenants.back().waiting;
    }
    out->gpus.push_back(std::move(view));
  }
}

}  // namespace

namespace {

Result<Snapshot> Take(const std::string& state_dir, OpenMode mode) {
  try {
    Result<std::unique_ptr<SegmentFile>> opened = OpenSegmentFile(state_dir, mode);
    if (!opened.ok()) return std::move(opened).status();
    const std::unique_ptr<SegmentFile>& file = *opened;
    Snapshot snapshot;
    Snapshot* out = &snapshot;
    out->path = file->path;
    Segment* segment = file->segment;
    if (file->writable) {
      // A table lock in a bad state has been reported (one line): the view is then read as a
      // reader without write permission reads it, unreaped and unlocked.
      TableLock table(segment, TableLock::Failure::kReport);
      // sabotage-point: reclaim-by-gpuslicectl-off
      if (table.locked()) ReapDeadLocked(segment, file->fd.get(), std::nullopt);
      Fill(*segment, table.locked() ? -1 : file->fd.get(), out);
    } else {
      Fill(*segment, file->fd.get(), out);
    }
    return snapshot;
  } catch (...) {
    return Status::Error("gpuslice: out of memory taking a snapshot of the broker state");
  }
}

}  // namespace

Result<Snapshot> TakeSnapshot(const std::string& state_dir) { return Take(state_dir, OpenMode::kAttachExisting); }

Result<Snapshot> TakeReadOnlySnapshot(const std::string& state_dir) { return Take(state_dir, OpenMode::kReadOnly); }

}  // namespace gpuslice::broker
