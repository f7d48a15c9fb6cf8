// The GPU's scheduler lock, which every grant decision holds, and the futex that threads waiting
// for the grant sleep on (docs/scheduling.md). Its fault lines name it by GPU entry.
#pragma once

#include <cstdint>
#include <string>

#include "broker/checked_index.h"
#include "broker/segment_layout.h"
#include "common/robust_mutex.h"

namespace gpuslice::broker {

// A grant decision lasts microseconds: the scheduler lock held longer than this is held by a
// process stopped inside a decision (SIGSTOP, a debugger) or is corrupt, and is not waited for.
inline constexpr uint64_t kSchedLockBoundNs = 1'000'000'000;

// kSchedLockBoundNs, or less where a test shortened every lock's timeout (SetLockTimeoutForTesting).
uint64_t SchedLockTimeoutNs();
// "the scheduler lock of GPU entry N": how its fault lines name it.
std::string SchedLockName(GpuIndex gpu);
// The one line saying that GPU `gpu`'s scheduler lock could not be taken, and what was `refused`.
std::string SchedLockFaultLine(const Segment* segment, GpuIndex gpu, LockFailure failure, const std::string& refused);
// Wakes every thread waiting for a change of the GPU's grant (futex on grant_seq).
void WakeGrantWaiters(GpuEntry* gpu);

// Holds the GPU's scheduler mutex, waiting at most `timeout_ns`. Nothing it guards needs repair
// after an owner died: every field is rewritten whole by the next decision. Not taken (a holder
// stopped inside a decision, a corrupt lock), nothing it guards may be touched.
class SchedLock {
 public:
  SchedLock(GpuEntry* gpu, uint64_t timeout_ns) : lock_(&gpu->sched_mutex.mutex, timeout_ns) {}
  [[nodiscard]] bool locked() const { return lock_.locked(); }
  LockFailure failure() const { return lock_.failure(); }

 private:
  RobustLock lock_;
};

}  // namespace gpuslice::broker
