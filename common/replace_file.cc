#include "common/replace_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/unique_fd.h"

namespace gpuslice {
namespace {

// write(2) until all is written: a regular file may still take less than asked (a signal).
bool WriteAll(int fd, std::string_view contents) {
  while (!contents.empty()) {
    const ssize_t n = ::write(fd, contents.data(), contents.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    contents.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

}  // namespace

Status ReplaceFile(const std::string& path, std::string_view contents) {
  // The process id keeps two writers of one path (two restarts overlapping) off each other's
  // temporary.
  const std::string temporary = path + ".tmp." + std::to_string(::getpid());
  bool written = false;
  int error = 0;
  {
    UniqueFd fd(::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666));
    if (!fd.valid()) return Status::Error(std::strerror(errno));
    written = WriteAll(fd.get(), contents);
    if (!written) error = errno ? errno : EIO;
    if (::close(fd.release()) != 0 && written) {
      written = false;
      error = errno;
    }
  }
  if (written && ::rename(temporary.c_str(), path.c_str()) != 0) {
    written = false;
    error = errno;
  }
  if (!written) {
    ::unlink(temporary.c_str());
    return Status::Error(std::strerror(error));
  }
  return Status::Ok();
}

}  // namespace gpuslice
