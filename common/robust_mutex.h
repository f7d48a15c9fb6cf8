// A process-shared, robust pthread mutex for state in shared memory.
//
// A process killed while holding it does not deadlock the others: the next locker gets the
// lock with `previous_owner_died` set, must repair what the dead owner may have left half
// written, and the mutex is then marked consistent again.
//
// The mutex lives in memory other processes can write, so its bytes are not trusted either: a
// lock whose bytes are not those of a robust process-shared mutex, that the kernel or glibc
// declares unusable, or that stays held past kRobustLockTimeoutNs (a forged owner that never
// unlocks, a holder stopped for good; with a timeout given) is NOT taken, and never aborts: `locked()` is false and
// `failure()` says why. Every caller must check locked() and fail closed.
#pragma once

#include <pthread.h>

#include <cstdint>
#include <string>

namespace gpuslice {

struct RobustMutex {
  pthread_mutex_t native;
};

// Initialises a mutex that lives in a shared mapping. Call once, by the segment's creator.
void InitRobustMutex(RobustMutex* mutex);

// How long the broker's lockers wait before they give up. Every critical section in the broker
// lasts microseconds (a reap of the whole process table, milliseconds), so a wait this long means
// a holder that will not return: give up and fail closed rather than hang the application.
inline constexpr uint64_t kRobustLockTimeoutNs = 10'000'000'000;
inline constexpr uint64_t kWaitForever = UINT64_MAX;

enum class LockFailure {
  kNone,
  kBadState,  // the bytes are not a robust process-shared mutex, or glibc refused it
  kTimedOut,  // held for kRobustLockTimeoutNs: a stopped or forged owner
};

// "is corrupt (...)" / "has been held for 10 s ..." (the bound the caller waited) — for the
// caller's one-line message.
std::string DescribeLockFailure(LockFailure failure, uint64_t bound_ns = kRobustLockTimeoutNs);

// The lock is taken with glibc's pthread_mutex_clocklock, and given back by ReleaseOwnRobustMutex
// (robust_mutex.cc) rather than pthread_mutex_unlock: glibc's unlock unlinks the mutex from the
// thread's robust list by following the two list pointers stored in the mutex itself, in memory
// any process of the segment can write; a stray write there crashed the holder (SIGSEGV) or made
// it write elsewhere in its own memory. The release here unlinks it with what the thread itself
// recorded when it took the lock, and reads nothing but the lock word from the mutex.
class RobustLock {
 public:
  explicit RobustLock(RobustMutex* mutex, uint64_t timeout_ns = kWaitForever);
  ~RobustLock();
  RobustLock(const RobustLock&) = delete;
  RobustLock& operator=(const RobustLock&) = delete;

  // False when the lock could not be taken (see failure()): the protected state must not be
  // touched, and the caller fails closed.
  [[nodiscard]] bool locked() const { return failure_ == LockFailure::kNone; }
  LockFailure failure() const { return failure_; }
  // True when the previous owner died holding the lock: the protected state must be repaired.
  bool previous_owner_died() const { return previous_owner_died_; }

 private:
  void Release();

  RobustMutex* mutex_;
  LockFailure failure_ = LockFailure::kNone;
  bool previous_owner_died_ = false;
  // This thread's robust list as it stood before the lock was taken (robust_mutex.cc), and the
  // lock word's owner bits once taken: what the release needs, none of it read back from the
  // mutex's own links.
  void* list_before_ = nullptr;
  uint32_t owner_word_ = 0;
};

}  // namespace gpuslice
