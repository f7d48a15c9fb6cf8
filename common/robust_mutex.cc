#include "common/robust_mutex.h"

#include <time.h>

#include <cerrno>
#include <cstdio>

namespace gpuslice {
namespace {

void InitAttributes(pthread_mutexattr_t* attr) {
  pthread_mutexattr_init(attr);
  pthread_mutexattr_setpshared(attr, PTHREAD_PROCESS_SHARED);
  pthread_mutexattr_setrobust(attr, PTHREAD_MUTEX_ROBUST);
}

// The type word glibc stores in a mutex initialised as InitRobustMutex does. A zeroed or
// overwritten mutex has another one, and glibc would lock it as a different kind of mutex (a
// zeroed one as a process-private, non-robust mutex that no other process can wake or repair),
// so a mismatch is treated as corruption before pthread is asked. glibc-specific (the field is
// in its public <bits/struct_mutex.h>); the only libc gpuslice supports.
int ExpectedKind() {
  static const int kind = [] {
    pthread_mutexattr_t attr;
    InitAttributes(&attr);
    pthread_mutex_t reference;
    pthread_mutex_init(&reference, &attr);
    pthread_mutexattr_destroy(&attr);
    return reference.__data.__kind;
  }();
  return kind;
}

// The deadline is on the monotonic clock (a wall-clock step must not shorten or stretch it),
// except under ThreadSanitizer: GCC 12's libtsan does not intercept pthread_mutex_clocklock, so it
// would never see the lock taken and report each unlock as "unlock of an unlocked mutex" (and
// miss the happens-before the lock gives). It does intercept pthread_mutex_timedlock, whose
// deadline is on the realtime clock; a TSan build is never deployed, so the clock step does not
// matter there.
#if defined(__SANITIZE_THREAD__)
constexpr clockid_t kDeadlineClock = CLOCK_REALTIME;
#else
constexpr clockid_t kDeadlineClock = CLOCK_MONOTONIC;
#endif

int LockBefore(pthread_mutex_t* mutex, uint64_t timeout_ns) {
  struct timespec deadline {};
  clock_gettime(kDeadlineClock, &deadline);
  const uint64_t seconds = timeout_ns / 1'000'000'000;
  deadline.tv_sec += static_cast<time_t>(seconds);
  deadline.tv_nsec += static_cast<long>(timeout_ns % 1'000'000'000);
  if (deadline.tv_nsec >= 1'000'000'000) {
    deadline.tv_sec += 1;
    deadline.tv_nsec -= 1'000'000'000;
  }
  int rc;
#if defined(__SANITIZE_THREAD__)
  while ((rc = pthread_mutex_timedlock(mutex, &deadline)) == EINTR) {
  }
#else
  while ((rc = pthread_mutex_clocklock(mutex, CLOCK_MONOTONIC, &deadline)) == EINTR) {
  }
#endif
  return rc;
}

}  // namespace

void InitRobustMutex(RobustMutex* mutex) {
  pthread_mutexattr_t attr;
  InitAttributes(&attr);
  pthread_mutex_init(&mutex->native, &attr);
  pthread_mutexattr_destroy(&attr);
}

std::string DescribeLockFailure(LockFailure failure, uint64_t bound_ns) {
  switch (failure) {
    case LockFailure::kNone: return "is usable";
    case LockFailure::kBadState: return "is corrupt (not a robust process-shared mutex, or unrecoverable)";
    case LockFailure::kTimedOut: {
      char bound[32];
      std::snprintf(bound, sizeof bound, "%g s", static_cast<double>(bound_ns) / 1e9);
      return std::string("has been held for ") + bound + " (by a stopped process, or it is corrupt)";
    }
  }
  return "is unusable";
}

RobustLock::RobustLock(RobustMutex* mutex, uint64_t timeout_ns) : mutex_(mutex) {
  // Another process may write the bytes at any time; glibc reads them again, but a zeroed or
  // overwritten type is caught here before it changes what kind of lock glibc takes.
  if (__atomic_load_n(&mutex_->native.__data.__kind, __ATOMIC_RELAXED) != ExpectedKind()) {
    failure_ = LockFailure::kBadState;
    return;
  }
  int rc;
  if (timeout_ns == kWaitForever) {
    rc = pthread_mutex_lock(&mutex_->native);
  } else {
    // Uncontended, the timed lock would cost a clock read for nothing (about 100 ns here, more
    // than the whole Reserve): try first, read the clock only to wait.
    rc = pthread_mutex_trylock(&mutex_->native);
    if (rc == EBUSY) rc = LockBefore(&mutex_->native, timeout_ns);
  }
  if (rc == EOWNERDEAD) {
    previous_owner_died_ = true;
    if (pthread_mutex_consistent(&mutex_->native) != 0) {  // the bytes changed under us
      pthread_mutex_unlock(&mutex_->native);
      failure_ = LockFailure::kBadState;
    }
  } else if (rc == ETIMEDOUT) {
    failure_ = LockFailure::kTimedOut;
  } else if (rc != 0) {
    // ENOTRECOVERABLE (a repair never marked consistent, which this class never leaves), EINVAL,
    // EDEADLK (a forged owner that is this thread), EAGAIN: bytes no correct process wrote.
    // Fail closed; never abort the application.
    failure_ = LockFailure::kBadState;
  }
}

RobustLock::~RobustLock() {
  if (locked()) pthread_mutex_unlock(&mutex_->native);
}

}  // namespace gpuslice
