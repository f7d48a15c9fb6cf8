#include "broker/access_advice.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <string>
#include <vector>

#include <fmt/format.h>

namespace gpuslice::broker {
namespace {

std::string Octal(mode_t mode) { return fmt::format("0{:o}", static_cast<unsigned>(mode & 07777)); }

// The name /etc/group gives `gid`, or "". The file is read directly (no NSS), at most 1 MiB of it.
std::string GroupName(unsigned gid) {
  std::FILE* file = std::fopen("/etc/group", "re");
  if (!file) return "";
  std::string found;
  char line[4096];
  for (size_t read = 0; read < (1u << 20) && std::fgets(line, sizeof line, file); read += std::strlen(line)) {
    // name:password:gid:members
    const char* first = std::strchr(line, ':');
    const char* second = first ? std::strchr(first + 1, ':') : nullptr;
    if (!second) continue;
    char* end = nullptr;
    const unsigned long value = std::strtoul(second + 1, &end, 10);
    if (end == second + 1 || *end != ':' || value != gid) continue;
    found.assign(line, static_cast<size_t>(first - line));
    break;
  }
  std::fclose(file);
  for (char c : found)
    if (static_cast<unsigned char>(c) <= ' ' || static_cast<unsigned char>(c) >= 0x7f) return "";  // not a name
  return found;
}

std::string Caller() {
  std::string text = fmt::format("uid {} (groups {}", geteuid(), DescribeGroup(getegid()));
  gid_t groups[64];
  const int n = getgroups(64, groups);
  for (int i = 0; i < n; ++i)
    if (groups[i] != getegid()) fmt::format_to(std::back_inserter(text), ", {}", DescribeGroup(groups[i]));
  return text + ")";
}

std::string Directory(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
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

std::string DescribeGroup(unsigned gid) {
  const std::string name = GroupName(gid);
  return name.empty() ? fmt::format("gid {}", gid) : fmt::format("{} (gid {})", name, gid);
}

std::string AccessAdvice(const std::string& path, bool write) {
  bool on_the_way = false;
  const std::string denying = Denying(path, &on_the_way);
  struct stat st {};
  std::string what = denying;
  std::string group = "GROUP";
  const bool known = stat(denying.c_str(), &st) == 0;
  if (known) {
    what +=
        fmt::format(" is owned by uid {}, group {}, mode {}", st.st_uid, DescribeGroup(st.st_gid), Octal(st.st_mode));
    group = DescribeGroup(st.st_gid);
  }
  const std::string need = on_the_way ? "enter it" : (write ? "read and write it" : "read it");
  // A file created before its directory was prepared keeps the group it was created with: the
  // directory's setgid bit gives its group only to files created after it was set.
  struct stat dir {};
  if (known && !on_the_way && stat(Directory(denying).c_str(), &dir) == 0 && (dir.st_mode & S_ISGID) &&
      dir.st_gid != st.st_gid) {
    return fmt::format(
        "permission denied: {}, and {} may not {}: the file keeps the group it was created with, not its directory's "
        "({}): chgrp {} {} && chmod 0660 {} (or remove it once no gpuslice process uses it: gpuslicectl status "
        "lists them; docs/broker.md, \"Permissions\")",
        what, Caller(), need, DescribeGroup(dir.st_gid), dir.st_gid, denying, denying);
  }
  return fmt::format(
      "permission denied: {}, and {} may not {}: run as a member of group {}"
      " (systemd: SupplementaryGroups=; Kubernetes: securityContext.supplementalGroups), or prepare the state "
      "directory for a group shared by every tenant and reader (chgrp GROUP DIR && chmod 2770 DIR; "
      "docs/broker.md, \"Permissions\")",
      what, Caller(), need, group);
}

}  // namespace gpuslice::broker
