// Process liveness that works across PID namespaces.
//
// A live process holds an open-file-description (OFD) write lock on one byte of a shared file.
// The kernel drops the lock when the process exits or is killed, whatever PID namespace it ran
// in, so "is the byte locked?" answers "is the owner alive?" without comparing PIDs. OFD locks
// (unlike classic fcntl locks) survive other descriptors of the same file being closed in the
// process; the descriptor is O_CLOEXEC and a forked child must close its inherited copy
// (CloseInheritedLockFd) so that the child never keeps a dead parent's slot alive.
#pragma once

#include <cstdint>

namespace gpuslice {

// Takes the lock on byte `offset` of fd without waiting. Returns false when someone holds it.
bool TryLockByte(int fd, uint64_t offset);

// Releases a byte lock taken with TryLockByte.
void UnlockByte(int fd, uint64_t offset);

// True when some open file description other than fd's holds a lock on the byte.
bool IsByteLockedByOther(int fd, uint64_t offset);

// True when some open file description other than fd's holds a lock on any byte of
// [offset, offset + length).
bool IsRangeLockedByOther(int fd, uint64_t offset, uint64_t length);

}  // namespace gpuslice
