#include "common/guarded_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "common/unique_fd.h"

namespace gpuslice {
namespace {

std::string Octal(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

std::string Problem(const std::string& what, const std::string& path, const std::string& why) {
  return what + " " + path + " " + why;
}

}  // namespace

Result<std::string> ReadGuardedFile(const std::string& path, uint64_t max_bytes, const std::string& what) {
  // O_NONBLOCK: a FIFO opens at once (and is refused below) instead of waiting for a writer.
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
  if (!fd.valid()) {
    if (errno == ENOENT) return Status::NotFound(Problem(what, path, "does not exist"));
    if (errno == ELOOP)
      return Status::Error(Problem(what, path, "is a symbolic link, which is not followed; it must be a regular file"));
    return Status::Error(Problem(what, path, std::string("cannot be opened: ") + std::strerror(errno)));
  }
  struct stat st {};
  if (fstat(fd.get(), &st) != 0)
    return Status::Error(Problem(what, path, std::string("cannot be inspected: ") + std::strerror(errno)));
  if (!S_ISREG(st.st_mode))
    return Status::Error(Problem(what, path, "is not a regular file (a FIFO, a device or a socket); it must be one"));
  if (st.st_uid != 0 && st.st_uid != geteuid()) {
    return Status::Error(Problem(what, path,
                                 "is owned by uid " + std::to_string(st.st_uid) + ", neither root nor this user (uid " +
                                     std::to_string(geteuid()) + "); only the program that writes it may own it"));
  }
  if (st.st_mode & (S_IWGRP | S_IWOTH)) {
    return Status::Error(Problem(what, path,
                                 "is writable by others (mode " + Octal(st.st_mode) +
                                     "), so anyone could rewrite it; it must be mode 0644 or stricter"));
  }
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    return Status::Error(Problem(what, path,
                                 "is " + std::to_string(st.st_size) + " bytes, more than the " +
                                     std::to_string(max_bytes) + " it may hold"));
  }
  // The size may grow after fstat: the read stops one byte past the bound, and says so.
  std::string contents(max_bytes + 1, '\0');
  size_t got = 0;
  while (got < contents.size()) {
    const ssize_t n = read(fd.get(), contents.data() + got, contents.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::Error(Problem(what, path, std::string("cannot be read: ") + std::strerror(errno)));
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  if (got > max_bytes)
    return Status::Error(Problem(what, path, "grew past the " + std::to_string(max_bytes) + " bytes it may hold"));
  contents.resize(got);
  return contents;
}

}  // namespace gpuslice
