// The state directory (GPUSLICE_STATE_DIR, default /run/gpuslice) is checked before the state
// file in it is trusted: whoever controls the directory controls which file every tenant maps.
//
// Accepted: a directory reached through a path that is resolved first (symbolic links on the
// way are followed once, by realpath, and the result is what is used from then on), whose every
// component is a directory owned by root or by this process's user, every ancestor writable by
// no one else unless it has the sticky bit (/tmp, /dev/shm: others cannot rename what is in it),
// and the state directory itself not world-writable (1777 included: any user could create the
// file first and lock every tenant out). Anything else is refused with one line naming the
// directory, what is wrong and what would be valid.
#pragma once

#include <string>

#include "common/status.h"

namespace gpuslice::broker {

enum class DirectoryUse {
  kCreateIfMissing,  // mkdir (0770, then fchmod: whatever the umask) in an existing parent
  kMustExist,
};

// The resolved, checked state directory, or an error of one line.
Result<std::string> CheckStateDirectory(const std::string& dir, DirectoryUse use);

}  // namespace gpuslice::broker
