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

namespace gpuslice::broker {
namespace {

constexpr mode_t kDirectoryMode = 0770;

std::string Octal(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

std::string Refuse(const std::string& dir, const std::string& why) {
  return "gpuslice: refusing state directory " + dir + " (GPUSLICE_STATE_DIR): " + why;
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
    return Status::Error(Refuse(dir, "cannot inspect " + component + ": " + std::strerror(errno)));
  }
  if (S_ISLNK(st.st_mode)) {
    return Status::Error(Refuse(dir, component + " was replaced by a symbolic link while it was checked; retry"));
  }
  if (!S_ISDIR(st.st_mode)) {
    return Status::Error(is_state_dir ? "gpuslice: state directory " + dir + " is not a directory"
                          : Refuse(dir, component + " is not a directory"));
  }
  const uid_t self = geteuid();
  if (st.st_uid != 0 && st.st_uid != self) {
    return Status::Error(Refuse(dir, (is_state_dir ? std::string("it") : component) + " is owned by uid " +
                             std::to_string(st.st_uid) + ", neither root nor this user (uid " +
                             std::to_string(self) + "); " +
                             (is_state_dir ? Valid() : "every directory on its path must be owned by root or this user")));
  }
  if (is_state_dir) {
    if (st.st_mode & S_IWOTH) {
      return Status::Error(Refuse(dir, "it is world-writable (mode " + Octal(st.st_mode) +
                               "): any user could create the state file first and lock every tenant out; " + Valid() +
                               " (chmod o-w " + dir + ")"));
    }
  } else if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX)) {
    return Status::Error(Refuse(dir, component + " (mode " + Octal(st.st_mode) +
                             ") is writable by others without the sticky bit, so they could replace the state "
                             "directory; every directory on its path must be writable only by root or this user, "
                             "or be sticky as /tmp is"));
  }
  return Status::Ok();
}

// Every component of an absolute, resolved path, from "/" down to its last, which is the state
// directory itself (`ends_in_state_dir`) or the parent it is about to be created in.
Status CheckPath(const std::string& resolved, bool ends_in_state_dir, const std::string& dir) {
  if (Status s = CheckComponent("/", ends_in_state_dir && resolved == "/", dir); !s.ok()) return s;
  for (size_t at = resolved.find('/', 1); ; at = resolved.find('/', at + 1)) {
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
    return Status::Error("gpuslice: cannot create state directory " + dir + " (mode 0770; its parent must exist): " +
             std::strerror(errno));
  }
  if (Status s = CheckPath(resolved_parent, /*ends_in_state_dir=*/false, dir); !s.ok()) return s;
  const std::string target = resolved_parent + (resolved_parent == "/" ? "" : "/") + name;
  if (mkdir(target.c_str(), kDirectoryMode) != 0) {
    if (errno == EEXIST) return Status::Ok();  // created meanwhile by another process: checked next
    return Status::Error("gpuslice: cannot create state directory " + dir + " (mode 0770; its parent must exist): " +
             std::strerror(errno));
  }
  // mkdir applied the umask; the mode is set explicitly instead (the umask is never changed).
  const int fd = open(target.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  const bool ok = fd >= 0 && fchmod(fd, kDirectoryMode) == 0;
  const int saved = errno;
  if (fd >= 0) close(fd);
  if (!ok) {
    return Status::Error("gpuslice: cannot set mode 0770 on state directory " + dir + ": " + std::strerror(saved));
  }
  return Status::Ok();
}

}  // namespace

Result<std::string> CheckStateDirectory(const std::string& dir, DirectoryUse use) {
  if (dir.empty()) return Status::InvalidArgument("gpuslice: the state directory is empty; it must name a directory");
  std::string resolved = Resolve(dir);
  if (resolved.empty() && errno == ENOENT) {
    if (use == DirectoryUse::kMustExist) {
      return Status::NotFound("gpuslice: state directory " + dir +
                              " does not exist: no gpuslice process has run on this node with this state directory");
    }
    if (Status s = Create(dir); !s.ok()) return s;
    resolved = Resolve(dir);
  }
  if (resolved.empty()) {
    if (errno == ENOTDIR) return Status::Error("gpuslice: state directory " + dir + " is not a directory");
    return Status::Error("gpuslice: cannot use state directory " + dir + ": " + std::strerror(errno));
  }
  if (Status s = CheckPath(resolved, /*ends_in_state_dir=*/true, dir); !s.ok()) return s;
  return resolved;
}

}  // namespace gpuslice::broker
