// Reading a small file that someone else writes, where others could put something else in its
// place: a FIFO (an open for reading blocks until a writer comes, for ever), a symbolic link (to
// /etc/shadow, read as root), a device, a file of gigabytes. The read never blocks, never follows
// a link in the last component, takes only a regular file owned by root or by this process's
// user that no one else may write, and reads at most `max_bytes`; anything else is an error of one
// line naming the file, what is wrong and what would be valid.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"

namespace gpuslice {

// The file's contents. NotFound when it does not exist (the ordinary "nothing written yet"); an
// Error with the one line otherwise. `what` names the file for a person ("the pods file").
Result<std::string> ReadGuardedFile(const std::string& path, uint64_t max_bytes, const std::string& what);

}  // namespace gpuslice
