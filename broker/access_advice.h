// What to say when the state directory or file denies this process (EACCES): "Permission denied"
// alone leaves an operator guessing whose file it is and what to change. The line names the path
// that denies (the file, or the first directory on the way that cannot be entered), its owner,
// group and mode, this process's uid and groups, and the fix. Numbers, not names: a container's
// user and group databases do not match the node's, and the shim must not load NSS modules.
#pragma once

#include <string>

namespace gpuslice::broker {

// For an EACCES while opening `path` for reading (and writing when `write`). Never fails: a path
// that can no longer be examined is described as far as it can be.
std::string AccessAdvice(const std::string& path, bool write);

}  // namespace gpuslice::broker
