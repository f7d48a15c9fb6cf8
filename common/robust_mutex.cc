#include "common/robust_mutex.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdio>

namespace gpuslice {
namespace {

// The release below is glibc's own for this kind of mutex (nptl/pthread_mutex_unlock.c, robust
// case), with the unlinking done from what the thread recorded instead of from the mutex. Under
// ThreadSanitizer glibc's unlock is used: the sanitizer must see it, and a TSan build is never
// deployed.
#if defined(__SANITIZE_THREAD__)
constexpr bool kOwnRelease = false;
#else
constexpr bool kOwnRelease = true;
#endif
static_assert(sizeof(__pthread_list_t) == 2 * sizeof(void*), "glibc's robust list entry: prev, next");
// glibc links a robust mutex by the address of its __list.__next; the entry is that less this.
constexpr size_t kNextOffset = offsetof(__pthread_list_t, __next);
// glibc's kind word (nptl/pthreadP.h): the type in the low 7 bits, PTHREAD_MUTEX_ROBUST_NORMAL_NP
// for a robust mutex of the default type; the process-shared bit above them.
constexpr int kKindTypeMask = 0x7f;
constexpr int kRobustNormalKind = 16;

// This thread's robust-list head, which glibc registered with the kernel (set_robust_list) when
// the thread started; null when the kernel does not say. Asked once per thread: a fork's child
// keeps the address (glibc registers the same head again in it).
robust_list_head* OwnRobustHead() {
  static thread_local robust_list_head* head __attribute__((tls_model("initial-exec"))) = nullptr;
  static thread_local bool asked __attribute__((tls_model("initial-exec"))) = false;
  if (!asked) {
    robust_list_head* found = nullptr;
    size_t length = 0;
    if (syscall(SYS_get_robust_list, 0, &found, &length) == 0 && length == sizeof(robust_list_head)) head = found;
    asked = true;
  }
  return head;
}

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
  // The thread's own memory: what the mutex is linked in front of once taken.
  if (robust_list_head* head = kOwnRelease ? OwnRobustHead() : nullptr) list_before_ = head->list.next;
  int rc;
  if (timeout_ns == kWaitForever) {
    rc = pthread_mutex_lock(&mutex_->native);
  } else {
    // Uncontended, the timed lock would cost a clock read for nothing (about 100 ns here, more
    // than the whole Reserve): try first, read the clock only to wait.
    rc = pthread_mutex_trylock(&mutex_->native);
    if (rc == EBUSY) rc = LockBefore(&mutex_->native, timeout_ns);
  }
  if (rc == 0 || rc == EOWNERDEAD)
    owner_word_ = static_cast<uint32_t>(__atomic_load_n(&mutex_->native.__data.__lock, __ATOMIC_RELAXED)) &
                  FUTEX_TID_MASK;
  if (rc == EOWNERDEAD) {
    previous_owner_died_ = true;
    if (pthread_mutex_consistent(&mutex_->native) != 0) {  // the bytes changed under us
      Release();
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
  if (locked()) Release();
}

void RobustLock::Release() {
  pthread_mutex_t* const native = &mutex_->native;
  robust_list_head* const head = kOwnRelease ? OwnRobustHead() : nullptr;
  auto* const entry = reinterpret_cast<robust_list*>(&native->__data.__list.__next);
  // Taken last by this thread and nothing taken since (RobustLock is scoped, so locks are given
  // back in the reverse order), of the kind whose release this is; else glibc's release.
  if (!head || !list_before_ || head->list.next != entry || (ExpectedKind() & kKindTypeMask) != kRobustNormalKind) {
    pthread_mutex_unlock(native);
    return;
  }
  // As glibc: the kernel finishes the release itself if this thread dies before the end.
  head->list_op_pending = entry;
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
  // Unlinked from the thread's list: the entry after it (another mutex, or the head itself when
  // the list is empty, whose word before it glibc keeps for this) takes the head as its previous.
  const uintptr_t next = reinterpret_cast<uintptr_t>(list_before_) & ~uintptr_t{1};
  *reinterpret_cast<void**>(next - kNextOffset) = head;
  head->list.next = static_cast<robust_list*>(list_before_);
  __atomic_store_n(&native->__data.__list.__prev, nullptr, __ATOMIC_RELAXED);
  __atomic_store_n(&native->__data.__list.__next, nullptr, __ATOMIC_RELAXED);
  __atomic_store_n(&native->__data.__owner, 0, __ATOMIC_RELAXED);
  __atomic_fetch_sub(&native->__data.__nusers, 1u, __ATOMIC_RELAXED);
  // A lock word that is no longer this thread's was written by someone else: not ours to clear.
  if ((static_cast<uint32_t>(__atomic_load_n(&native->__data.__lock, __ATOMIC_RELAXED)) & FUTEX_TID_MASK) ==
      owner_word_) {
    const int before = __atomic_exchange_n(&native->__data.__lock, 0, __ATOMIC_RELEASE);
    if (static_cast<uint32_t>(before) & FUTEX_WAITERS)
      syscall(SYS_futex, &native->__data.__lock, FUTEX_WAKE, 1, nullptr, nullptr, 0);
  }
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
  head->list_op_pending = nullptr;
}

}  // namespace gpuslice
