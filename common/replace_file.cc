#include "common/replace_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "common/quantity.h"
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

constexpr std::string_view kTemporary = ".tmp.";

// The writer's pid of a temporary "<file>.tmp.<pid>", or 0 for any other name.
pid_t TemporaryWriter(std::string_view name) {
  const size_t at = name.rfind(kTemporary);
  if (at == std::string_view::npos || at == 0) return 0;
  const auto pid = ParseUnsigned(name.substr(at + kTemporary.size()));
  return pid && *pid > 0 && *pid <= INT32_MAX ? static_cast<pid_t>(*pid) : 0;
}

bool WriterGone(pid_t pid) { return pid == ::getpid() || (::kill(pid, 0) != 0 && errno == ESRCH); }

}  // namespace

std::vector<std::string> RemoveStaleTemporaries(const std::string& dir, std::string_view prefix) {
  std::vector<std::string> removed;
  DIR* entries = ::opendir(dir.c_str());
  if (!entries) return removed;
  while (const dirent* entry = ::readdir(entries)) {
    const std::string_view name = entry->d_name;
    if (!name.starts_with(prefix)) continue;
    const pid_t writer = TemporaryWriter(name);
    if (writer == 0 || !WriterGone(writer)) continue;
    if (::unlinkat(::dirfd(entries), entry->d_name, 0) == 0) removed.emplace_back(name);
  }
  ::closedir(entries);
  return removed;
}

Status ReplaceFile(const std::string& path, std::string_view contents) {
  // The process id keeps two writers of one path (two restarts overlapping) off each other's
  // temporary, and tells RemoveStaleTemporaries whose it is.
  const std::string temporary = path + std::string(kTemporary) + std::to_string(::getpid());
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
