// What to say when the state directory or file denies this process (EACCES): "Permission denied"
// alone leaves an operator guessing whose file it is and what to change. The line names the path
// that denies (the file, or the first directory on the way that cannot be entered), its owner,
// group and mode, this process's uid and groups, and the fix. A group is named as /etc/group here
// names it, beside its number (read as a file: the shim must not load NSS modules, and a
// container's /etc/group may not know the node's groups, so the number is always said). A state
// file whose group is not its setgid directory's (created before the directory was prepared)
// gets the chgrp that fixes it.
#pragma once

#include <string>

namespace gpuslice::broker {

// For an EACCES while opening `path` for reading (and writing when `write`). Never fails: a path
// that can no longer be examined is described as far as it can be.
std::string AccessAdvice(const std::string& path, bool write);

// "gpuslice (gid 995)", or "gid 995" when /etc/group has no name for it.
std::string DescribeGroup(unsigned gid);

}  // namespace gpuslice::broker
