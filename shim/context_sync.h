// What a GPU's launch tracker needs of the process's contexts, and no more: ShimState implements
// it (shim/launch_routing.cc), so that the tracker does not depend on the whole shim state and
// the two do not call each other in a cycle.
#pragma once

#include <vector>

#include "common/mutex.h"
#include "shim/driver_api.h"

namespace gpuslice::broker {
class ComputeGate;
}

namespace gpuslice::shim {

class ContextSync {
 public:
  virtual ~ContextSync() = default;
  // Held (MutexLock) while the tracker queries its events and around the application's context
  // teardown: the driver forbids using a context while it is destroyed.
  virtual Mutex& pause_mutex() = 0;
  // On the monitor's thread: waits for all work of the process's contexts on `gate`'s GPU; the
  // contexts whose work it waited for are added to `synchronized`.
  virtual void SynchronizeGate(broker::ComputeGate* gate, std::vector<CUcontext>* synchronized) = 0;
};

}  // namespace gpuslice::shim
