// Replacing a file's contents so that a reader opening it at any moment (the kubelet reading a CDI
// spec, gpuslicectl reading pods.json, a driver reading its own checkpoint after a restart) finds
// the old contents or the new, never a part of them: the new contents are written to a temporary
// file beside it (the same directory, so that the rename stays within one file system) and renamed
// over it. Crash consistency is not sought: nothing is fsync'ed, so after a power loss the file
// may be either version or empty.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"

namespace gpuslice {

// Writes `contents` to `path` as above (mode 0666 less the umask when `path` is new). On failure
// `path` is as it was, the temporary is removed, and the error's message is the reason alone
// (strerror's text): the caller says what the file is.
Status ReplaceFile(const std::string& path, std::string_view contents);

}  // namespace gpuslice
