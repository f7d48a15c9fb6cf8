#include "broker/lock_fault.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "broker/checked_index.h"
#include "common/mutex.h"
#include "common/mutex_lock.h"
#include "common/printable.h"
#include "common/thread_annotations.h"

namespace gpuslice::broker {
namespace {

std::atomic<FaultReporter> g_reporter{nullptr};
std::atomic<uint64_t> g_lock_timeout_ns{kRobustLockTimeoutNs};

// Few segments are ever mapped in one process (one in the shim); the table is tiny.
Mutex& PathsMutex() {
  static auto* mutex = new Mutex();  // never destroyed: used from exit-time destructors
  return *mutex;
}
std::vector<std::pair<const Segment*, std::string>>& Paths() REQUIRES(PathsMutex()) {
  static auto* paths = new std::vector<std::pair<const Segment*, std::string>>();
  return *paths;
}

// Locks already reported, so that a broken ledger prints one line, not one per allocation.
constexpr int kMaxReported = 64;
const void* g_reported[kMaxReported] GUARDED_BY(PathsMutex());
int g_reported_count GUARDED_BY(PathsMutex()) = 0;

std::string PathOf(const Segment* segment) {
  MutexLock lock(&PathsMutex());
  for (const auto& [mapped, path] : Paths())
    if (mapped == segment) return path;
  return "the broker's state file";
}

void Emit(const std::string& line) {
  if (FaultReporter reporter = g_reporter.load()) {
    reporter(line.c_str());
    return;
  }
  std::string out = line + "\n";
  (void)!write(STDERR_FILENO, out.data(), out.size());
}

}  // namespace

void SetFaultReporter(FaultReporter reporter) { g_reporter.store(reporter); }

uint64_t LockTimeoutNs() { return g_lock_timeout_ns.load(std::memory_order_relaxed); }
void SetLockTimeoutForTesting(uint64_t timeout_ns) { g_lock_timeout_ns.store(timeout_ns); }

void RememberSegmentPath(const Segment* segment, const std::string& path) {
  try {
    MutexLock lock(&PathsMutex());
    Paths().emplace_back(segment, path);
  } catch (...) {
    // Out of memory: the lines then say "the broker's state file" instead of its path.
  }
}

void ForgetSegmentPath(const Segment* segment) {
  MutexLock lock(&PathsMutex());
  std::erase_if(Paths(), [&](const auto& entry) { return entry.first == segment; });
}

std::string LockFaultLine(const Segment* segment, const std::string& lock, LockFailure failure,
                          const std::string& refused, uint64_t bound_ns) {
  const std::string path = PathOf(segment);
  return fmt::format(
      "gpuslice: {} in {} {}: {}; once no gpuslice process uses it (gpuslicectl status lists them), "
      "remove {} and start again",
      lock, path, DescribeLockFailure(failure, bound_ns), refused, path);
}

void ReportLockFault(const Segment* segment, const void* mutex, const std::string& lock, LockFailure failure,
                     const std::string& refused, uint64_t bound_ns) {
  try {
    {
      MutexLock guard(&PathsMutex());
      if (std::find(g_reported, g_reported + g_reported_count, mutex) != g_reported + g_reported_count) return;
      if (g_reported_count < kMaxReported) g_reported[g_reported_count++] = mutex;
    }
    Emit(LockFaultLine(segment, lock, failure, refused, bound_ns));
  } catch (...) {
    // Out of memory: the refusal itself still happens.
  }
}

void ReportLedgerLockFault(const Segment* segment, LedgerId ledger, LockFailure failure) {
  const TenantEntry& tenant = At(*segment, ledger.tenant());
  try {
    // Bytes anyone could have written: the line stays one printable line.
    const std::string name = Printable(std::string_view(tenant.name, NameLength(tenant)));
    ReportLockFault(segment, &At(*segment, ledger).mutex,
                    fmt::format("the memory ledger lock of tenant '{}' on GPU entry {}", name, ledger.gpu().value()),
                    failure, "that tenant's allocations on that GPU are refused");
  } catch (...) {
  }
}

void ReportLedgerLockRecovered(const Segment* segment, LedgerId ledger) {
  const void* mutex = &At(*segment, ledger).mutex;
  try {
    {
      MutexLock guard(&PathsMutex());
      const auto end = g_reported + g_reported_count;
      if (const auto it = std::find(g_reported, end, mutex); it != end) {
        *it = g_reported[--g_reported_count];
      }
    }
    const TenantEntry& tenant = At(*segment, ledger.tenant());
    const std::string name = Printable(std::string_view(tenant.name, NameLength(tenant)));
    Emit(
        fmt::format("gpuslice: the memory ledger lock of tenant '{}' on GPU entry {} in {} is free again: that "
                    "tenant's allocations on that GPU go on, and the frees held back meanwhile are credited",
                    name, ledger.gpu().value(), PathOf(segment)));
  } catch (...) {
  }
}

namespace {
constexpr char kTableLock[] = "the table lock";
constexpr char kTableLockRefused[] = "no process can register, open a GPU or be reaped";
}  // namespace

TableLock::TableLock(Segment* segment, Failure on_failure)
    : segment_(segment), lock_(&segment->header.table_mutex.mutex, LockTimeoutNs()) {
  if (lock_.locked() || on_failure != Failure::kReport) return;
  ReportLockFault(segment, &segment->header.table_mutex, kTableLock, lock_.failure(), kTableLockRefused);
}

Status TableLock::status() const {
  if (lock_.locked()) return Status::Ok();
  try {
    return Status::Unavailable(LockFaultLine(segment_, kTableLock, lock_.failure(), kTableLockRefused));
  } catch (...) {
    return Status::Unavailable("");
  }
}

}  // namespace gpuslice::broker
