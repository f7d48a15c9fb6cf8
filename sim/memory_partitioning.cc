#include "sim/memory_partitioning.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "common/robust_mutex.h"

namespace gpuslice::sim {
namespace {

// nvmlReturn_t's values (common/nvml_api.h), without the NVML header's macros here.
constexpr int kSuccess = 0;
constexpr int kInvalidArgument = 2;
constexpr int kNotSupported = 3;
constexpr int kNoPermission = 4;
constexpr int kInsufficientResources = 23;
// NVML_DEVICE_MEMORY_LIMIT_MAX: no hard limit. A soft limit of 0 and this clear the limits.
constexpr uint64_t kNoHardLimit = UINT64_MAX;

// `cgroup` is `limit_path` or one of its descendants (a limit binds the whole subtree).
bool Within(const char* cgroup, const char* limit_path) {
  const size_t n = strnlen(limit_path, kCgroupPathBytes);
  if (n == 0 || std::strncmp(cgroup, limit_path, n) != 0) return false;
  return cgroup[n] == '\0' || cgroup[n] == '/' || (n > 1 && limit_path[n - 1] == '/');
}

// What the processes of `path` and its descendants hold on `unit` (exited slots hold nothing).
uint64_t HeldByCgroupLocked(SimState& state, int unit, const char* path) {
  const SimPartitioning& p = state.segment().partitioning;
  uint64_t held = 0;
  for (int slot = 0; slot < kMaxProcesses; ++slot)
    if (Within(p.process_cgroup[slot], path)) held += state.device(unit).processes[slot].memory_used.load();
  return held;
}

bool Supported(SimState& state, int unit) {
  return HasMemoryPartitioning(state.segment()) && unit >= 0 && unit < state.device_count() && !state.mig_enabled(unit);
}

bool ValidPath(const char* cgroup) {
  return cgroup != nullptr && cgroup[0] == '/' && strnlen(cgroup, kCgroupPathBytes) < kCgroupPathBytes;
}

}  // namespace

std::string OwnCgroupPath() {
  FILE* f = std::fopen("/proc/self/cgroup", "re");
  if (!f) return "";
  std::string path;
  char line[kCgroupPathBytes + 64];
  while (std::fgets(line, sizeof line, f)) {
    if (std::strncmp(line, "0::", 3) != 0) continue;
    std::string rest(line + 3);
    while (!rest.empty() && (rest.back() == '\n' || rest.back() == '\r')) rest.pop_back();
    path = rest == "/" ? "/sys/fs/cgroup" : "/sys/fs/cgroup" + rest;
  }
  std::fclose(f);
  return path.size() < static_cast<size_t>(kCgroupPathBytes) ? path : "";
}

bool HasMemoryPartitioning(const SimSegment& segment) {
  return segment.partitioning.driver_branch >= kPartitioningDriverBranch;
}

CgroupRoom CgroupRoomLocked(SimState& state, int unit, const char* cgroup) {
  CgroupRoom room;
  if (!Supported(state, unit) || cgroup[0] == '\0') return room;
  for (const SimCgroupLimit& limit : state.segment().partitioning.limits) {
    if (!limit.in_use || limit.unit != unit || !Within(cgroup, limit.path)) continue;
    const uint64_t held = HeldByCgroupLocked(state, unit, limit.path);
    room.limit = std::min(room.limit, limit.hard);
    room.left = std::min(room.left, limit.hard > held ? limit.hard - held : 0);
  }
  return room;
}

CgroupRoom CgroupRoomOf(SimState& state, int unit, const std::string& cgroup) {
  RobustLock lock(&state.segment().table_mutex);
  return CgroupRoomLocked(state, unit, cgroup.c_str());
}

int SetCgroupLimits(SimState& state, int unit, const char* cgroup, uint64_t soft, uint64_t hard, bool privileged) {
  RobustLock lock(&state.segment().table_mutex);
  if (!Supported(state, unit)) return kNotSupported;
  if (!privileged) return kNoPermission;
  if (!ValidPath(cgroup) || soft > hard) return kInvalidArgument;
  SimCgroupLimit* entry = nullptr;
  SimCgroupLimit* free_entry = nullptr;
  for (SimCgroupLimit& limit : state.segment().partitioning.limits) {
    if (limit.in_use && limit.unit == unit && std::strncmp(limit.path, cgroup, kCgroupPathBytes) == 0) entry = &limit;
    if (!limit.in_use && !free_entry) free_entry = &limit;
  }
  if (soft == 0 && hard == kNoHardLimit) {  // cleared
    if (entry) entry->in_use = 0;
    return kSuccess;
  }
  if (!entry) entry = free_entry;
  if (!entry) return kInsufficientResources;
  entry->unit = unit;
  entry->soft = soft;
  entry->hard = hard;
  std::snprintf(entry->path, sizeof entry->path, "%s", cgroup);
  entry->in_use = 1;
  return kSuccess;
}

int GetCgroupLimits(SimState& state, int unit, const char* cgroup, uint64_t* soft, uint64_t* hard, uint64_t* used) {
  RobustLock lock(&state.segment().table_mutex);
  if (!Supported(state, unit)) return kNotSupported;
  if (!ValidPath(cgroup) || !soft || !hard || !used) return kInvalidArgument;
  *soft = 0;
  *hard = kNoHardLimit;
  for (const SimCgroupLimit& limit : state.segment().partitioning.limits) {
    if (limit.in_use && limit.unit == unit && std::strncmp(limit.path, cgroup, kCgroupPathBytes) == 0) {
      *soft = limit.soft;
      *hard = limit.hard;
    }
  }
  *used = HeldByCgroupLocked(state, unit, cgroup);
  return kSuccess;
}

}  // namespace gpuslice::sim
