// A process-local mutex that Clang's thread-safety analysis knows (common/thread_annotations.h):
// std::mutex with the capability attributes libstdc++'s lacks. Members it guards are declared
// GUARDED_BY it; it is taken with MutexLock (common/mutex_lock.h) and waited on with CondVar
// (common/cond_var.h). Every call is std::mutex's own, inlined: nothing is added to a hot path.
#pragma once

#include <mutex>

#include "common/thread_annotations.h"

namespace gpuslice {

class CondVar;

class CAPABILITY("mutex") Mutex {
 public:
  constexpr Mutex() noexcept = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ACQUIRE() { mutex_.lock(); }
  void Unlock() RELEASE() { mutex_.unlock(); }

 private:
  friend class CondVar;  // waits on the std::mutex itself
  std::mutex mutex_;
};

}  // namespace gpuslice
