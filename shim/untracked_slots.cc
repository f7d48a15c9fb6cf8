#include "shim/untracked_slots.h"

#include <linux/membarrier.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace gpuslice::shim {
namespace {

long Membarrier(int cmd) { return syscall(SYS_membarrier, cmd, 0U, 0); }

// Registration is per address space: a forked child registers again when it creates its own
// trackers (its parent's are abandoned at the fork).
bool RegisterAsymmetricFence() { return Membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0; }

}  // namespace

UntrackedSlots::UntrackedSlots() : asymmetric_(RegisterAsymmetricFence()) {}

bool UntrackedSlots::AnyInside() const {
  for (const Slot& slot : own_) {
    if (slot.flag.load(std::memory_order_acquire) != 0) return true;
  }
  return shared_.count.load(std::memory_order_acquire) != 0;
}

void UntrackedSlots::Drain() const {
  // The caller's store of the tracking switch, then this barrier on every thread of the process:
  // a launcher whose flag store came before it is seen below; one after it sees the switch. If
  // the barrier fails now (it never should once registered), the flags' own fences still hold
  // only for launchers that fence themselves: fall back to waiting a scheduling round.
  if (asymmetric_) {
    if (Membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0) sched_yield();
  } else {
    std::atomic_thread_fence(std::memory_order_seq_cst);
  }
  while (AnyInside()) sched_yield();
}

}  // namespace gpuslice::shim
