#include "common/robust_mutex.h"

#include <cerrno>
#include <cstdlib>

namespace gpuslice {

void InitRobustMutex(RobustMutex* mutex) {
  pthread_mutexattr_t attr;
  pthread_mutexattr_init(&attr);
  pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
  pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
  pthread_mutex_init(&mutex->native, &attr);
  pthread_mutexattr_destroy(&attr);
}

RobustLock::RobustLock(RobustMutex* mutex) : mutex_(mutex) {
  const int rc = pthread_mutex_lock(&mutex_->native);
  if (rc == EOWNERDEAD) {
    previous_owner_died_ = true;
    pthread_mutex_consistent(&mutex_->native);
  } else if (rc != 0) {
    // ENOTRECOVERABLE can only follow a repair that was never marked consistent, which this
    // class never does; anything else is memory corruption. Neither can be survived safely.
    std::abort();
  }
}

RobustLock::~RobustLock() { pthread_mutex_unlock(&mutex_->native); }

}  // namespace gpuslice
