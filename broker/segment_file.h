// Creating, validating and mapping the broker's state file (<state dir>/gpuslice.state).
//
// Creation is serialised by flock(2) on the file itself, and the creator stores the magic last,
// so a file with a valid magic is always fully initialised; a creator killed halfway leaves a
// file without magic, which the next creator (holding the flock) initialises again. A file with a
// valid magic is mapped without taking any lock, so hundreds of attaching processes never queue.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>

#include <boost/interprocess/mapped_region.hpp>

#include "broker/segment_layout.h"
#include "common/status.h"
#include "common/unique_fd.h"

namespace gpuslice::broker {

struct SegmentFile {
  ~SegmentFile();

  std::string path;
  // Open (O_CLOEXEC) for the life of the mapping: liveness locks are taken through it. None
  // after ForgetAfterFork until reopened.
  UniqueFd fd;
  int owner_pid = 0;      // the process that opened fd (a forked child must open its own)
  bool writable = false;  // false: mapped read-only (a reader without write permission)
  dev_t device = 0;       // identity of the mapped file, to reopen exactly that file
  ino_t inode = 0;
  boost::interprocess::mapped_region region;
  Segment* segment = nullptr;
};

enum class OpenMode {
  kCreateOrAttach,  // create the directory (0770) and the file (0660) when absent
  kAttachExisting,  // never create; fall back to a read-only mapping without write permission
  kReadOnly,        // never create, never write: always a read-only mapping (gpuslice-exporter)
};

// Maps <state_dir>/gpuslice.state. An error of one line (naming the file and what would be valid)
// for anything that is not a compatible, non-world-writable regular file.
Result<std::unique_ptr<SegmentFile>> OpenSegmentFile(const std::string& state_dir, OpenMode mode);

// Opens a new descriptor (a new open file description, so no lock of the old one is shared) on
// the mapped file, after fork. An error when the file was removed or replaced.
Status ReopenSegmentDescriptor(SegmentFile* file);

// Checks a header read from `path` (file size `file_size`). Exposed for the corrupt-file tests.
Status ValidateHeader(const SegmentHeader& header, uint64_t file_size, const std::string& path);

}  // namespace gpuslice::broker
