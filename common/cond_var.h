// A condition variable waited on with a Mutex (common/mutex.h) held, as std::condition_variable
// is with a std::mutex: the caller holds the mutex (the analysis checks it), the wait releases it
// and takes it again before it returns.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <utility>

#include "common/mutex.h"
#include "common/thread_annotations.h"

namespace gpuslice {

class CondVar {
 public:
  CondVar() = default;
  CondVar(const CondVar&) = delete;
  CondVar& operator=(const CondVar&) = delete;

  // Waits until `done()` holds or `timeout` passes; returns done(). `done` runs with the mutex
  // held: a lambda that reads what the mutex guards says so (`[&]() REQUIRES(mutex_) {...}`).
  template <typename Rep, typename Period, typename Predicate>
  bool WaitFor(Mutex* mutex, const std::chrono::duration<Rep, Period>& timeout, Predicate done) REQUIRES(mutex) {
    std::unique_lock<std::mutex> lock(mutex->mutex_, std::adopt_lock);  // held already, and after
    const bool result = cv_.wait_for(lock, timeout, std::move(done));
    lock.release();
    return result;
  }
  void SignalAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

}  // namespace gpuslice
