#include "shim/untracked_slots.h"

#include <sched.h>

namespace gpuslice::shim {

bool UntrackedSlots::AnyInside() const {
  for (const Slot& slot : own_) {
    if (slot.flag.load(std::memory_order_acquire) != 0) return true;
  }
  return shared_.count.load(std::memory_order_acquire) != 0;
}

void UntrackedSlots::Drain() const {
  // The caller's store of the tracking switch, then this barrier on every thread of the process:
  // a launcher whose flag store came before it is seen below; one after it sees the switch.
  fence_.Heavy();
  while (AnyInside()) sched_yield();
}

}  // namespace gpuslice::shim
