#include "broker/access_advice.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <iterator>
#include <string>
#include <vector>

#include <fmt/format.h>

namespace gpuslice::broker {
namespace {

std::string Octal(mode_t mode) { return fmt::format("0{:o}", static_cast<unsigned>(mode & 07777)); }

std::string Caller() {
  std::string text = fmt::format("uid {} (groups {}", geteuid(), getegid());
  gid_t groups[64];
  const int n = getgroups(64, groups);
  for (int i = 0; i < n; ++i)
    if (groups[i] != getegid()) fmt::format_to(std::back_inserter(text), " {}", groups[i]);
  return text + ")";
}

// The first directory on the way to `path` that this process cannot enter, else `path` itself.
std::string Denying(const std::string& path, bool* is_directory_on_the_way) {
  *is_directory_on_the_way = true;
  for (size_t slash = path.find('/', 1); slash != std::string::npos; slash = path.find('/', slash + 1)) {
    const std::string dir = path.substr(0, slash);
    if (faccessat(AT_FDCWD, dir.c_str(), X_OK, AT_EACCESS) != 0) return dir;
  }
  *is_directory_on_the_way = false;
  return path;
}

}  // namespace

std::string AccessAdvice(const std::string& path, bool write) {
  bool on_the_way = false;
  const std::string denying = Denying(path, &on_the_way);
  struct stat st {};
  std::string what = denying;
  std::string group = "GROUP";
  if (stat(denying.c_str(), &st) == 0) {
    what += fmt::format(" is owned by uid {}, group {}, mode {}", st.st_uid, st.st_gid, Octal(st.st_mode));
    group = fmt::format("{}", st.st_gid);
  }
  const std::string need = on_the_way ? "enter it" : (write ? "read and write it" : "read it");
  return fmt::format(
      "permission denied: {}, and {} may not {}: run as a member of group {}"
      " (systemd: SupplementaryGroups=; Kubernetes: securityContext.supplementalGroups), or prepare the state "
      "directory for a group shared by every tenant and reader (chgrp GROUP DIR && chmod 2770 DIR; "
      "docs/broker.md, \"Permissions\")",
      what, Caller(), need, group);
}

}  // namespace gpuslice::broker
