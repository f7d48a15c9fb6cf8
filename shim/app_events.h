// What the application's own events stand for: an event the application records behind its
// launches completes when they do, so its cuEventSynchronize or a cuEventQuery that answers
// CUDA_SUCCESS tells the launch tracker they are done — for free (shim/hooks_sync.cc). A
// trainer that waits for the event of the kernel two back (the usual way to keep a queue) is
// followed without a single query of the shim's own.
//
// A fixed table, one slot per event hash: an event whose slot another one took is simply not
// followed this way (the pollers still see its launches complete). Recording an event again
// moves its mark; recording it where the calling thread has no track clears it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/mutex.h"
#include "common/mutex_lock.h"
#include "common/thread_annotations.h"
#include "shim/driver_api.h"
#include "shim/launch_tracker.h"

namespace gpuslice::shim {

class AppEvents {
 public:
  struct Mark {
    LaunchTracker* tracker = nullptr;
    LaunchTracker::Snapshot::Item item{};
  };

  void Note(CUevent event, const Mark& mark) {
    MutexLock lock(&mutex_);
    slots_[SlotOf(event)] = Slot{event, mark};
  }
  void Forget(CUevent event) {
    MutexLock lock(&mutex_);
    Slot& slot = slots_[SlotOf(event)];
    if (slot.event == event) slot = Slot{};
  }
  bool Find(CUevent event, Mark* mark) {
    MutexLock lock(&mutex_);
    const Slot& slot = slots_[SlotOf(event)];
    if (slot.event != event || !event) return false;
    *mark = slot.mark;
    return true;
  }

 private:
  static constexpr size_t kSlots = 1024;
  static size_t SlotOf(CUevent event) {
    const auto bits = reinterpret_cast<uintptr_t>(event);
    return ((bits >> 4) ^ (bits >> 14)) % kSlots;
  }
  struct Slot {
    CUevent event = nullptr;
    Mark mark;
  };
  Mutex mutex_;
  Slot slots_[kSlots] GUARDED_BY(mutex_);
};

}  // namespace gpuslice::shim
