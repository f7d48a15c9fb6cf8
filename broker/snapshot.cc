// TakeSnapshot: the read-mostly view for gpuslicectl. It reaps first (so the figures exclude
// dead processes) and reads under the table mutex, so no entry is claimed or recycled mid-read.
// Without write permission it reads the atomics as they are, unreaped and unlocked.
#include <algorithm>
#include <cstring>
#include <optional>

#include "broker/broker.h"
#include "broker/ledger.h"
#include "broker/segment_file.h"
#include "broker/grant_policy.h"
#include "broker/tables.h"
#include "common/clock.h"
#include "common/robust_mutex.h"

namespace gpuslice::broker {
namespace {

constexpr uint32_t kInUse = static_cast<uint32_t>(EntryState::kInUse);
constexpr uint32_t kRegistered = static_cast<uint32_t>(ProcessState::kRegistered);

TenantView ViewTenant(const Segment& segment, int tenant, int gpu) {
  const TenantEntry& entry = segment.tenants[tenant];
  const LedgerEntry& ledger = segment.ledgers[LedgerIndex(tenant, gpu)];
  TenantView view;
  view.name.assign(entry.name, std::min<size_t>(entry.name_length, kTenantNameBytes - 1));
  view.quota = ledger.quota.load();
  view.used = ledger.used.load();
  view.request_pct = ledger.request_pct.load();
  view.limit_pct = ledger.limit_pct.load();
  view.waiting = 0;
  view.service_ns = ledger.service_ns.load();
  view.compute_class = ledger.compute_class.load();
  view.grants_received = ledger.grants_received.load();
  view.waits = ledger.waits.load();
  view.wait_ns = ledger.wait_ns.load();
  view.refused_allocations = ledger.refused_allocations.load();
  view.last_share_ppm = ledger.last_share_ppm.load();
  const uint32_t processes = std::min<uint32_t>(segment.header.process_high_water.load(), kMaxProcesses);
  for (uint32_t p = 0; p < processes; ++p) {
    const ProcessEntry& process = segment.processes[p];
    if (process.state.load() != kRegistered || process.tenant.load() != tenant) continue;
    const uint64_t charged = process.charged[gpu].load();
    if (charged == 0 && !(process.open_gpus.load() & (1u << gpu))) continue;
    // Waiting now: its waiting stamp is within the lease (a stale one is a stopped or dead waiter).
    const uint64_t stamp = process.sched[gpu].waiting_ns.load();
    const uint64_t now = MonotonicNanos();
    if (stamp != 0 && (stamp >= now || now - stamp < LeaseOf(segment.gpus[gpu]))) ++view.waiting;
    view.processes.push_back(ProcessView{process.pid.load(), charged});
  }
  return view;
}

void Fill(const Segment& segment, Snapshot* out) {
  out->layout_version = segment.header.layout_version;
  out->taken_ns = MonotonicNanos();
  out->ledger_repairs = segment.header.ledger_repairs.load();
  out->processes_reaped = segment.header.processes_reaped.load();
  const uint32_t gpus = std::min<uint32_t>(segment.header.gpu_high_water.load(), kMaxGpus);
  const uint32_t tenants = std::min<uint32_t>(segment.header.tenant_high_water.load(), kMaxTenants);
  for (uint32_t g = 0; g < gpus; ++g) {
    const GpuEntry& gpu = segment.gpus[g];
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
    view.window_start_ns = gpu.window_start_ns.load();
    const uint32_t holder = gpu.holder.load();
    if (holder != 0 && holder <= tenants && segment.tenants[holder - 1].state.load() == kInUse) {
      const TenantEntry& entry = segment.tenants[holder - 1];
      view.holder.assign(entry.name, std::min<size_t>(entry.name_length, kTenantNameBytes - 1));
    }
    for (uint32_t t = 0; t < tenants; ++t) {
      if (segment.tenants[t].state.load() != kInUse) continue;
      const LedgerEntry& ledger = segment.ledgers[LedgerIndex(t, g)];
      if (ledger.state.load() != kInUse) continue;
      // The first window starts at the GPU's first grant, before anyone was served, so it sets
      // every window_service_ns to 0; each later roll writes last_share_ppm and sets them to the
      // service so far, which is not 0 for the tenants served in the window that ended.
      if (view.window_start_ns != 0 && (ledger.window_service_ns.load() != 0 || ledger.last_share_ppm.load() != 0))
        view.share_window_complete = true;
      view.tenants.push_back(ViewTenant(segment, static_cast<int>(t), static_cast<int>(g)));
      view.waiting += view.tenants.back().waiting;
    }
    out->gpus.push_back(std::move(view));
  }
}

}  // namespace

bool TakeSnapshot(const std::string& state_dir, Snapshot* out, std::string* error) {
  std::string ignored;
  if (!error) error = &ignored;
  try {
    auto file = OpenSegmentFile(state_dir, OpenMode::kAttachExisting, error);
    if (!file) return false;
    *out = Snapshot();
    out->path = file->path;
    Segment* segment = file->segment;
    if (file->writable) {
      RobustLock table(&segment->header.table_mutex.mutex);
      ReapDeadLocked(segment, file->fd, /*own_slot=*/-1);
      Fill(*segment, out);
    } else {
      Fill(*segment, out);
    }
    return true;
  } catch (...) {
    *error = "gpuslice: out of memory taking a snapshot of the broker state";
    return false;
  }
}

}  // namespace gpuslice::broker
