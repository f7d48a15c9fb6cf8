#include "broker/sched_lock.h"

#include <algorithm>
#include <string>

#include "broker/lock_fault.h"
#include "common/futex.h"

namespace gpuslice::broker {

// sabotage-point: sched-lock-unbounded
uint64_t SchedLockTimeoutNs() { return std::min(kSchedLockBoundNs, LockTimeoutNs()); }

std::string SchedLockName(GpuIndex gpu) { return "the scheduler lock of GPU entry " + std::to_string(gpu.value()); }

std::string SchedLockFaultLine(const Segment* segment, GpuIndex gpu, LockFailure failure, const std::string& refused) {
  return LockFaultLine(segment, SchedLockName(gpu), failure, refused, SchedLockTimeoutNs());
}

void WakeGrantWaiters(GpuEntry* gpu) {
  gpu->grant_seq.fetch_add(1);
  FutexWakeAll(&gpu->grant_seq);
}

}  // namespace gpuslice::broker
