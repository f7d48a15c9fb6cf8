// A lock of the segment in a bad state (broker/segment_layout.h's robust mutexes; RobustLock
// gives up on bytes no correct process wrote, and on a holder that never returns): the broker
// fails closed on what that lock guards, and says so in one line naming the file and what to do.
//
// Lines go to the process's fault reporter (the shim's log; stderr by default), once per lock:
// a broken ledger refuses every allocation of its tenant on that GPU, and one line is enough.
#pragma once

#include <string>

#include "broker/checked_index.h"
#include "broker/segment_layout.h"
#include "common/robust_mutex.h"
#include "common/status.h"

namespace gpuslice::broker {

using FaultReporter = void (*)(const char* line);
// Where fault lines go (nullptr: stderr). Process-wide; set once, before the broker is used.
void SetFaultReporter(FaultReporter reporter);

// How long the broker waits for one of the segment's locks: kRobustLockTimeoutNs, or what a
// fuzzer or test set (a forged lock word then costs milliseconds, not 10 s per iteration).
uint64_t LockTimeoutNs();
void SetLockTimeoutForTesting(uint64_t timeout_ns);

// The mapped segment's file, for the lines (segment_file.cc registers every mapping).
void RememberSegmentPath(const Segment* segment, const std::string& path);
void ForgetSegmentPath(const Segment* segment);

// The one line for `lock` (e.g. "the table lock", "the ledger lock of tenant 'a' on GPU 2"),
// which failed as `failure` says, and what is refused because of it.
std::string LockFaultLine(const Segment* segment, const std::string& lock, LockFailure failure,
                          const std::string& refused, uint64_t bound_ns = LockTimeoutNs());

// Reports LockFaultLine(...) to the fault reporter, once per lock (`mutex`) in this process.
void ReportLockFault(const Segment* segment, const void* mutex, const std::string& lock, LockFailure failure,
                     const std::string& refused, uint64_t bound_ns = LockTimeoutNs());

// The same for a ledger lock: names the tenant and GPU.
void ReportLedgerLockFault(const Segment* segment, LedgerId ledger, LockFailure failure);

// A ledger lock this process had given up on was taken again: one line saying that the tenant's
// allocations on that GPU go on, and a later fault of the same lock is reported again.
void ReportLedgerLockRecovered(const Segment* segment, LedgerId ledger);

// The header's table mutex, waited for at most LockTimeoutNs(). When it cannot be taken, the one
// line for it is reported (`report`), or left to the caller, which returns status() in its error.
class TableLock {
 public:
  enum class Failure { kReport, kReturn };
  TableLock(Segment* segment, Failure on_failure);
  TableLock(const TableLock&) = delete;
  TableLock& operator=(const TableLock&) = delete;
  [[nodiscard]] bool locked() const { return lock_.locked(); }
  // Ok when locked; else the one line saying why not and what is refused.
  Status status() const;

 private:
  Segment* segment_;
  RobustLock lock_;
};

}  // namespace gpuslice::broker
