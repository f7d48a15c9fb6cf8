// A process-shared, robust pthread mutex for state in shared memory.
//
// A process killed while holding it does not deadlock the others: the next locker gets the
// lock with `previous_owner_died` set, must repair what the dead owner may have left half
// written, and the mutex is then marked consistent again.
#pragma once

#include <pthread.h>

namespace gpuslice {

struct RobustMutex {
  pthread_mutex_t native;
};

// Initialises a mutex that lives in a shared mapping. Call once, by the segment's creator.
void InitRobustMutex(RobustMutex* mutex);

class RobustLock {
 public:
  explicit RobustLock(RobustMutex* mutex);
  ~RobustLock();
  RobustLock(const RobustLock&) = delete;
  RobustLock& operator=(const RobustLock&) = delete;

  // True when the previous owner died holding the lock: the protected state must be repaired.
  bool previous_owner_died() const { return previous_owner_died_; }

 private:
  RobustMutex* mutex_;
  bool previous_owner_died_ = false;
};

}  // namespace gpuslice
