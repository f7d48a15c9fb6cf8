#include "common/process_lock.h"

#include <fcntl.h>

namespace gpuslice {
namespace {

struct flock ByteLock(short type, uint64_t offset, uint64_t length = 1) {
  struct flock lock {};
  lock.l_type = type;
  lock.l_whence = SEEK_SET;
  lock.l_start = static_cast<off_t>(offset);
  lock.l_len = static_cast<off_t>(length);
  lock.l_pid = 0;  // required to be 0 for OFD locks
  return lock;
}

}  // namespace

bool TryLockByte(int fd, uint64_t offset) {
  struct flock lock = ByteLock(F_WRLCK, offset);
  return fcntl(fd, F_OFD_SETLK, &lock) == 0;
}

void UnlockByte(int fd, uint64_t offset) {
  struct flock lock = ByteLock(F_UNLCK, offset);
  fcntl(fd, F_OFD_SETLK, &lock);
}

bool IsByteLockedByOther(int fd, uint64_t offset) { return IsRangeLockedByOther(fd, offset, 1); }

bool IsRangeLockedByOther(int fd, uint64_t offset, uint64_t length) {
  struct flock lock = ByteLock(F_WRLCK, offset, length);
  if (fcntl(fd, F_OFD_GETLK, &lock) != 0) return false;
  return lock.l_type != F_UNLCK;
}

}  // namespace gpuslice
