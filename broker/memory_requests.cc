#include "broker/memory_requests.h"

#include <algorithm>
#include <bitset>
#include <cstring>
#include <string_view>

#include <fmt/format.h>

#include "broker/lock_fault.h"
#include "broker/memory_share.h"
#include "broker/uuid.h"
#include "common/printable.h"

namespace gpuslice::broker {
namespace {

constexpr uint32_t kInUse = static_cast<uint32_t>(EntryState::kInUse);
constexpr uint32_t kRegistered = static_cast<uint32_t>(ProcessState::kRegistered);

// A forged figure must not wrap a sum into a small one: it saturates (and refuses).
uint64_t SaturatingAdd(uint64_t a, uint64_t b) { return b > UINT64_MAX - a ? UINT64_MAX : a + b; }

bool LedgerInUse(const Segment& segment, TenantIndex tenant, GpuIndex gpu) {
  return At(segment, tenant).state.load() == kInUse &&
         At(segment, LedgerId::Of(tenant, gpu)).state.load(std::memory_order_acquire) == kInUse;
}

// Tenants with a registered process that has `gpu` open (dead ones count until reaped: a request
// is released late, never early).
std::bitset<kMaxTenants> TenantsWithGpuOpen(const Segment& segment, GpuIndex gpu) {
  std::bitset<kMaxTenants> open;
  for (ProcessSlot slot : UsedProcessSlots(segment)) {
    const ProcessEntry& process = At(segment, slot);
    if (process.state.load() != kRegistered || !IsGpuOpen(process, gpu)) continue;
    if (const auto tenant = TenantOf(process)) open.set(static_cast<size_t>(tenant->value()));
  }
  return open;
}

// One tenant's figures on a GPU; `held` says whether its request is held.
struct TenantMemory {
  TenantIndex tenant;
  uint64_t used = 0;
  uint64_t request = 0;
  bool held = false;
  uint64_t committed() const { return held && request > used ? request : used; }
  uint64_t borrowed() const { return used > (held ? request : 0) ? used - (held ? request : 0) : 0; }
};

// Calls visit(TenantMemory) for every tenant but `except` with a ledger in use on `gpu`.
template <typename Visit>
void ForEachOther(const Segment& segment, GpuIndex gpu, TenantIndex except, Visit visit) {
  // Whether a request is held by an open process is asked of the process table only when some
  // request is not announced (a scan of it): most allocations never need it.
  bool ask_processes = false;
  for (TenantIndex t : UsedTenants(segment)) {
    if (t == except || !LedgerInUse(segment, t, gpu)) continue;
    const LedgerEntry& entry = At(segment, LedgerId::Of(t, gpu));
    if (entry.request.load() > 0 && entry.announced.load() == 0) ask_processes = true;
  }
  const std::bitset<kMaxTenants> open = ask_processes ? TenantsWithGpuOpen(segment, gpu) : std::bitset<kMaxTenants>();
  for (TenantIndex t : UsedTenants(segment)) {
    if (t == except || !LedgerInUse(segment, t, gpu)) continue;
    const LedgerEntry& entry = At(segment, LedgerId::Of(t, gpu));
    TenantMemory memory{t};
    // Sequentially consistent, as the fast path's store of `used` (Broker::TryCharge).
    memory.used = entry.used.load();
    memory.request = entry.request.load();
    memory.held = memory.request > 0 && (entry.announced.load() != 0 || open.test(static_cast<size_t>(t.value())));
    visit(memory);
  }
}

std::string Name(const Segment& segment, TenantIndex tenant) {
  const TenantEntry& entry = At(segment, tenant);
  return Printable(std::string_view(entry.name, NameLength(entry)));
}

std::string GpuName(const Segment& segment, GpuIndex gpu) {
  return GpuUuidOf(segment, gpu) + " (" + MemoryText(At(segment, gpu).total_memory.load()) + ")";
}

}  // namespace

std::string GpuUuidOf(const Segment& segment, GpuIndex gpu) {
  const GpuEntry& entry = At(segment, gpu);
  uint8_t uuid[16];
  const uint64_t words[2] = {entry.uuid[0].load(), entry.uuid[1].load()};
  std::memcpy(uuid, words, sizeof uuid);
  return FormatUuid(uuid);
}

GpuMemoryLock::GpuMemoryLock(Segment* segment, GpuIndex gpu, uint64_t timeout_ns)
    : lock_(&At(*segment, gpu).memory_mutex.mutex, timeout_ns) {
  // Nothing is stored under this lock: a holder that died leaves nothing to repair.
  if (!lock_.locked()) {
    ReportLockFault(segment, &At(*segment, gpu).memory_mutex,
                    fmt::format("the memory-request lock of GPU {}", gpu.value()), lock_.failure(),
                    "allocations beyond a tenant's request, and new requests, are refused on that GPU");
  }
}

OtherTenants OthersOnGpu(const Segment& segment, GpuIndex gpu, TenantIndex except) {
  OtherTenants others;
  ForEachOther(segment, gpu, except, [&](const TenantMemory& m) {
    if (m.held) others.held_requests = SaturatingAdd(others.held_requests, m.request);
    others.committed = SaturatingAdd(others.committed, m.committed());
  });
  return others;
}

bool FitsBeside(uint64_t total, const OtherTenants& others, uint64_t request, uint64_t used_after) {
  // sabotage-point: borrowing-unchecked
  if (used_after <= request) return true;                      // within its guarantee
  if (others.held_requests == 0 && request == 0) return true;  // no request on the GPU: no rule
  return others.committed <= total && used_after <= total - others.committed;
}

void SetRequest(Segment* segment, LedgerId ledger, uint64_t request) {
  std::atomic<uint64_t>& stored = At(*segment, ledger).request;
  std::atomic<uint32_t>& count = At(*segment, ledger.gpu()).request_ledgers;
  const uint64_t before = stored.load();
  // sabotage-point: request-count-never-raised
  if (before == 0 && request != 0) count.fetch_add(1);
  stored.store(request);
  if (before != 0 && request == 0) {
    uint32_t now = count.load();
    while (now != 0 && !count.compare_exchange_weak(now, now - 1)) {
    }
  }
}

Status HoldRequest(Segment* segment, LedgerId ledger, uint64_t timeout_ns, bool refuse_if_borrowed,
                   MemoryAnnouncer announce, std::string* borrowed_line) {
  LedgerEntry& entry = At(*segment, ledger);
  const uint64_t request = entry.request.load();
  const uint64_t used = entry.used.load();
  GpuMemoryLock lock(segment, ledger.gpu(), timeout_ns);
  if (!lock.locked()) {
    return Status::Unavailable(LockFaultLine(segment,
                                             fmt::format("the memory-request lock of GPU {}", ledger.gpu().value()),
                                             lock.failure(), "requests on that GPU cannot be held"));
  }
  const OtherTenants others = OthersOnGpu(*segment, ledger.gpu(), ledger.tenant());
  const uint64_t total = At(*segment, ledger.gpu()).total_memory.load();
  if (others.held_requests > total || request > total - others.held_requests) {
    return Status::ResourceExhausted(RequestsOverGpuLine(*segment, ledger.gpu(), ledger.tenant(), request));
  }
  const uint64_t committed = std::max(request, used);
  if (others.committed > total || committed > total - others.committed) {
    std::string line = BorrowedAwayLine(*segment, ledger.gpu(), ledger.tenant(), request);
    // sabotage-point: request-held-over-borrowers
    if (refuse_if_borrowed) return Status::ResourceExhausted(std::move(line));
    if (borrowed_line) *borrowed_line = std::move(line);
  }
  if (announce != MemoryAnnouncer::kNone) entry.announced.store(static_cast<uint32_t>(announce));
  return Status::Ok();
}

bool RequestHeldElsewhere(const Segment& segment, LedgerId ledger, std::optional<ProcessSlot> except_process) {
  if (At(segment, ledger).announced.load() != 0) return true;
  for (ProcessSlot slot : UsedProcessSlots(segment)) {
    if (slot == except_process) continue;
    const ProcessEntry& process = At(segment, slot);
    if (process.state.load() == kRegistered && process.tenant.load() == ledger.tenant().value() &&
        IsGpuOpen(process, ledger.gpu()))
      return true;
  }
  return false;
}

std::string RequestsOverGpuLine(const Segment& segment, GpuIndex gpu, TenantIndex tenant, uint64_t request) {
  std::string held;
  uint64_t sum = 0;
  ForEachOther(segment, gpu, tenant, [&](const TenantMemory& m) {
    if (!m.held) return;
    held += fmt::format("{}tenant '{}' {}", held.empty() ? "" : ", ", Name(segment, m.tenant), MemoryText(m.request));
    sum = SaturatingAdd(sum, m.request);
  });
  return fmt::format(
      "gpuslice: tenant '{}' asks GPU {} for a memory request of {}, but the requests held there already reserve {} "
      "({}): the requests on a GPU together may not exceed its memory; lower GPUSLICE_MEMORY_REQUEST or use "
      "another GPU",
      Name(segment, tenant), GpuName(segment, gpu), MemoryText(request), MemoryText(sum), held);
}

std::string BorrowedAwayLine(const Segment& segment, GpuIndex gpu, TenantIndex tenant, uint64_t request) {
  std::string borrowers;
  uint64_t committed = 0;
  ForEachOther(segment, gpu, tenant, [&](const TenantMemory& m) {
    committed = SaturatingAdd(committed, m.committed());
    if (m.borrowed() == 0) return;
    borrowers += fmt::format("{}tenant '{}' {} beyond {}", borrowers.empty() ? "" : ", ", Name(segment, m.tenant),
                             MemoryText(m.borrowed()),
                             m.held ? "its request of " + MemoryText(m.request) : std::string("no request"));
  });
  const uint64_t total = At(segment, gpu).total_memory.load();
  const uint64_t missing = SaturatingAdd(committed, request) - std::min(total, SaturatingAdd(committed, request));
  return fmt::format(
      "gpuslice: tenant '{}' cannot hold its memory request of {} on GPU {}: {} of it is borrowed ({}); its "
      "processes are refused until the borrowers free it (announce the request through gpuslice-device-plugin or "
      "gpuslice-dra-driver to reserve it before the container starts)",
      Name(segment, tenant), MemoryText(request), GpuName(segment, gpu), MemoryText(missing),
      borrowers.empty() ? "by processes that died and are not yet reaped" : borrowers);
}

std::string MemoryText(uint64_t bytes) {
  if (bytes == kUnlimited) return "unlimited";
  constexpr uint64_t kMi = 1ULL << 20, kGi = 1ULL << 30;
  if (bytes >= kGi) {
    return bytes % kGi == 0 ? fmt::format("{} GiB", bytes / kGi)
                            : fmt::format("{:.2f} GiB", static_cast<double>(bytes) / static_cast<double>(kGi));
  }
  if (bytes >= kMi) {
    return bytes % kMi == 0 ? fmt::format("{} MiB", bytes / kMi)
                            : fmt::format("{:.1f} MiB", static_cast<double>(bytes) / static_cast<double>(kMi));
  }
  return fmt::format("{} bytes", bytes);
}

}  // namespace gpuslice::broker
