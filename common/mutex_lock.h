// Holds a Mutex (common/mutex.h) from its construction to the end of its scope, as
// std::lock_guard does a std::mutex; Clang's analysis knows the mutex is held meanwhile.
#pragma once

#include "common/mutex.h"
#include "common/thread_annotations.h"

namespace gpuslice {

class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex* mutex) ACQUIRE(mutex) : mutex_(mutex) { mutex_->Lock(); }
  ~MutexLock() RELEASE() { mutex_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mutex_;
};

}  // namespace gpuslice
