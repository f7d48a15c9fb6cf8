// Replacing a file's contents so that a reader opening it at any moment (the kubelet reading a CDI
// spec, gpuslicectl reading pods.json, a driver reading its own checkpoint after a restart) finds
// the old contents or the new, never a part of them: the new contents are written to a temporary
// file beside it (the same directory, so that the rename stays within one file system) and renamed
// over it. Crash consistency is not sought: nothing is fsync'ed, so after a power loss the file
// may be either version or empty.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace gpuslice {

// Writes `contents` to `path` as above (mode 0666 less the umask when `path` is new). On failure
// `path` is as it was, the temporary is removed, and the error's message is the reason alone
// (strerror's text): the caller says what the file is.
Status ReplaceFile(const std::string& path, std::string_view contents);

// What a writer killed between its write and its rename leaves: "<file>.tmp.<pid>". Removes, in
// `dir`, every such temporary whose file name starts with `prefix` and whose writer is gone (no
// process of that pid runs here, or it is this process, which must call this before it writes
// those files). A live writer's temporary is left alone. Returns the names removed; one that
// cannot be removed is skipped (the next start tries again).
std::vector<std::string> RemoveStaleTemporaries(const std::string& dir, std::string_view prefix);

}  // namespace gpuslice
