#include "broker/state_dir.h"

#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include <fmt/format.h>

#include "common/unique_fd.h"

namespace gpuslice::broker {
namespace {

constexpr mode_t kDirectoryMode = 0770;

std::string Octal(mode_t mode) { return fmt::format("{:04o}", static_cast<unsigned>(mode & 07777)); }

std::string Refuse(const std::string& dir, const std::string& why) {
  return fmt::format("gpuslice: refusing state directory {} (GPUSLICE_STATE_DIR): {}", dir, why);
}

std::string Valid() {
  return "it must be a directory owned by root or by this user and not writable by others, e.g. mode 0770 or "
         "2770";
}

// realpath(3) into a std::string; empty with errno set on failure.
std::string Resolve(const std::string& path) {
  std::unique_ptr<char, decltype(&free)> resolved(realpath(path.c_str(), nullptr), &free);
  return resolved ? std::string(resolved.get()) : std::string();
}

// Checks one component of the resolved path (lstat: a link swapped in since realpath is refused).
Status CheckComponent(const std::string& component, bool is_state_dir, const std::string& dir) {
  struct stat st {};
  if (lstat(component.c_str(), &st) != 0) {
    return Status::Error(Refuse(dir, fmt::format("cannot inspect {}: {}", component, std::strerror(errno))));
  }
  if (S_ISLNK(st.st_mode)) {
    return Status::Error(
        Refuse(dir, fmt::format("{} was replaced by a symbolic link while it was checked; retry", component)));
  }
  if (!S_ISDIR(st.st_mode)) {
    return Status::Error(is_state_dir ? fmt::format("gpuslice: state directory {} is not a directory", dir)
                                      : Refuse(dir, fmt::format("{} is not a directory", component)));
  }
  const uid_t self = geteuid();
  if (st.st_uid != 0 && st.st_uid != self) {
    return Status::Error(Refuse(
        dir, fmt::format("{} is owned by uid {}, neither root nor this user (uid {}); {}",
                         (is_state_dir ? std::string("it") : component), st.st_uid, self,
                         (is_state_dir ? Valid() : "every directory on its path must be owned by root or this user"))));
  }
  if (is_state_dir) {
    if (st.st_mode & S_IWOTH) {
      return Status::Error(Refuse(dir, fmt::format("it is world-writable (mode {}): any user could create the state "
                                                   "file first and lock every tenant out; {} (chmod o-w {})",
                                                   Octal(st.st_mode), Valid(), dir)));
    }
  } else if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX)) {
    return Status::Error(Refuse(
        dir,
        fmt::format(
            "{} (mode {}) is writable by others without the sticky bit, so they could replace the state directory; "
            "every directory on its path must be writable only by root or this user, or be sticky as /tmp is",
            component, Octal(st.st_mode))));
  }
  return Status::Ok();
}

// Every component of an absolute, resolved path, from "/" down to its last, which is the state
// directory itself (`ends_in_state_dir`) or the parent it is about to be created in.
Status CheckPath(const std::string& resolved, bool ends_in_state_dir, const std::string& dir) {
  if (Status s = CheckComponent("/", ends_in_state_dir && resolved == "/", dir); !s.ok()) return s;
  for (size_t at = resolved.find('/', 1);; at = resolved.find('/', at + 1)) {
    const std::string component = resolved.substr(0, at);
    const bool last = at == std::string::npos;
    if (component.size() > 1) {
      if (Status s = CheckComponent(component, ends_in_state_dir && last, dir); !s.ok()) return s;
    }
    if (last) return Status::Ok();
  }
}

Status Create(const std::string& dir) {
  // The parent must exist; it is resolved and checked before anything is created in it.
  const size_t slash = dir.find_last_not_of('/') == std::string::npos ? std::string::npos
                                                                      : dir.rfind('/', dir.find_last_not_of('/'));
  const std::string parent = slash == std::string::npos ? "." : (slash == 0 ? "/" : dir.substr(0, slash));
  const std::string name = dir.substr(slash == std::string::npos ? 0 : slash + 1);
  const std::string resolved_parent = Resolve(parent);
  if (resolved_parent.empty()) {
    return Status::Error(
        fmt::format("gpuslice: cannot create state directory {} (mode 0770; its parent must exist): {}", dir,
                    std::strerror(errno)));
  }
  if (Status s = CheckPath(resolved_parent, /*ends_in_state_dir=*/false, dir); !s.ok()) return s;
  const std::string target = resolved_parent + (resolved_parent == "/" ? "" : "/") + name;
  if (mkdir(target.c_str(), kDirectoryMode) != 0) {
    if (errno == EEXIST) return Status::Ok();  // created meanwhile by another process: checked next
    return Status::Error(
        fmt::format("gpuslice: cannot create state directory {} (mode 0770; its parent must exist): {}", dir,
                    std::strerror(errno)));
  }
  // mkdir applied the umask; the mode is set explicitly instead (the umask is never changed).
  const UniqueFd fd(open(target.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW));
  const bool ok = fd.valid() && fchmod(fd.get(), kDirectoryMode) == 0;
  const int saved = errno;
  if (!ok) {
    return Status::Error(
        fmt::format("gpuslice: cannot set mode 0770 on state directory {}: {}", dir, std::strerror(saved)));
  }
  return Status::Ok();
}

}  // namespace

Result<std::string> CheckStateDirectory(const std::string& dir, DirectoryUse use) {
  if (dir.empty()) return Status::InvalidArgument("gpuslice: the state directory is empty; it must name a directory");
  std::string resolved = Resolve(dir);
  if (resolved.empty() && errno == ENOENT) {
    if (use == DirectoryUse::kMustExist) {
      return Status::NotFound(
          fmt::format("gpuslice: state directory {} does not exist: no gpuslice process has run on this node with this "
                      "state directory",
                      dir));
    }
    if (Status s = Create(dir); !s.ok()) return s;
    resolved = Resolve(dir);
  }
  if (resolved.empty()) {
    if (errno == ENOTDIR) return Status::Error(fmt::format("gpuslice: state directory {} is not a directory", dir));
    return Status::Error(fmt::format("gpuslice: cannot use state directory {}: {}", dir, std::strerror(errno)));
  }
  if (Status s = CheckPath(resolved, /*ends_in_state_dir=*/true, dir); !s.ok()) return s;
  return resolved;
}

}  // namespace gpuslice::broker
