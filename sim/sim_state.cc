#include "sim/sim_state.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>

#include "common/clock.h"
#include "common/futex.h"
#include "common/process_lock.h"
#include "common/robust_mutex.h"
#include "sim/memory_partitioning.h"
#include "sim/sim_config.h"

namespace gpuslice::sim {
namespace {

std::string Errno(const char* what, const std::string& path) {
  return std::string("gpuslice-sim: cannot ") + what + " " + path + ": " + std::strerror(errno);
}

// Checks what an existing file claims to be before trusting any of it.
bool Validate(const SimSegment* s, const std::string& path, std::string* error) {
  if (s->magic != kSimMagic) {
    *error = "gpuslice-sim: " + path + " is not a simulator state file (bad magic); remove it";
    return false;
  }
  if (s->layout_version != kSimLayoutVersion || s->segment_size != sizeof(SimSegment)) {
    *error = "gpuslice-sim: " + path + " has layout version " + std::to_string(s->layout_version) + " and size " +
             std::to_string(s->segment_size) + ", this build expects version " + std::to_string(kSimLayoutVersion) +
             " and size " + std::to_string(sizeof(SimSegment)) + "; stop the processes using it and remove it";
    return false;
  }
  if (s->device_count < 1 || s->device_count > static_cast<uint32_t>(kMaxDevices)) {
    *error = "gpuslice-sim: " + path + " is corrupt (device count " + std::to_string(s->device_count) + ")";
    return false;
  }
  bool mig_ok = s->mig.instance_count <= static_cast<uint32_t>(kMaxMigInstances);
  for (uint32_t i = 0; mig_ok && i < s->mig.instance_count; ++i)
    mig_ok = s->mig.instances[i].gpu >= 0 && static_cast<uint32_t>(s->mig.instances[i].gpu) < s->device_count;
  if (!mig_ok) {
    *error = "gpuslice-sim: " + path + " is corrupt (MIG instances)";
    return false;
  }
  return true;
}

void Initialise(SimSegment* s, const SimConfig& config) {
  std::memset(static_cast<void*>(s), 0, sizeof(SimSegment));
  s->layout_version = kSimLayoutVersion;
  s->device_count = static_cast<uint32_t>(config.device_count);
  s->segment_size = sizeof(SimSegment);
  s->created_ns = MonotonicNanos();
  InitRobustMutex(&s->table_mutex);
  for (int i = 0; i < kMaxDevices; ++i) s->devices[i].config = config.devices[i];
  s->mig.instance_count = config.mig_instance_count;
  s->mig.enabled_gpus = config.mig_enabled_gpus;
  for (int i = 0; i < kMaxMigInstances; ++i) {
    s->mig.instances[i] = config.mig_instances[i];
    s->mig.units[i].config = config.mig_units[i];
  }
  s->mps.enabled_gpus = config.mps_enabled_gpus;
  s->partitioning.driver_branch = config.driver_branch;
  for (int i = 0; i < kMaxDevices; ++i) s->mps.devices[i].sms_free = config.devices[i].sm_count;
  // The magic goes last: a reader that sees it sees a fully initialised segment.
  std::atomic_thread_fence(std::memory_order_release);
  s->magic = kSimMagic;
}

std::unique_ptr<SimState> Map(const std::string& path, bool create, std::string* error,
                              SimState* (*make)(std::string, int, SimSegment*)) {
  const int fd = open(path.c_str(), O_RDWR | O_CLOEXEC | (create ? O_CREAT : 0), 0660);
  if (fd < 0) {
    *error = Errno("open", path);
    return nullptr;
  }
  // flock serialises creation; the kernel drops it if the creator dies halfway.
  if (flock(fd, LOCK_EX) != 0) {
    *error = Errno("lock", path);
    close(fd);
    return nullptr;
  }
  struct stat st {};
  fstat(fd, &st);
  const bool fresh = st.st_size == 0;
  if (fresh) {
    if (!create) {
      *error = "gpuslice-sim: " + path + " is empty: no simulated device has been used yet";
      close(fd);
      return nullptr;
    }
    SimConfig config;
    if (!LoadSimConfigFromEnv(&config, error)) {
      close(fd);
      return nullptr;
    }
    fchmod(fd, 0660);
    if (ftruncate(fd, sizeof(SimSegment)) != 0) {
      *error = Errno("size", path);
      close(fd);
      return nullptr;
    }
    void* addr = mmap(nullptr, sizeof(SimSegment), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (addr == MAP_FAILED) {
      *error = Errno("map", path);
      close(fd);
      return nullptr;
    }
    Initialise(static_cast<SimSegment*>(addr), config);
    flock(fd, LOCK_UN);
    return std::unique_ptr<SimState>(make(path, fd, static_cast<SimSegment*>(addr)));
  }
  if (static_cast<size_t>(st.st_size) < sizeof(uint64_t) * 3) {
    *error = "gpuslice-sim: " + path + " is truncated (" + std::to_string(st.st_size) + " bytes); remove it";
    close(fd);
    return nullptr;
  }
  const size_t mapped = static_cast<size_t>(st.st_size);
  void* addr = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (addr == MAP_FAILED) {
    *error = Errno("map", path);
    close(fd);
    return nullptr;
  }
  auto* segment = static_cast<SimSegment*>(addr);
  if (mapped != sizeof(SimSegment) || !Validate(segment, path, error)) {
    if (mapped != sizeof(SimSegment) && error->empty())
      *error = "gpuslice-sim: " + path + " has size " + std::to_string(mapped) + ", this build expects " +
               std::to_string(sizeof(SimSegment)) + "; stop the processes using it and remove it";
    if (mapped != sizeof(SimSegment) && segment->magic == kSimMagic && mapped >= sizeof(uint64_t) * 3)
      Validate(segment, path, error);  // prefer the message that names the layout version
    munmap(addr, mapped);
    close(fd);
    return nullptr;
  }
  flock(fd, LOCK_UN);
  return std::unique_ptr<SimState>(make(path, fd, segment));
}

}  // namespace

SimState::SimState(std::string path, int fd, SimSegment* segment)
    : path_(std::move(path)), fd_(fd), segment_(segment) {}

SimState::~SimState() {
  munmap(segment_, sizeof(SimSegment));
  if (fd_ >= 0) close(fd_);
}

std::unique_ptr<SimState> SimState::OpenOrCreate(std::string* error) {
  return Map(SimStatePath(), true, error,
             [](std::string p, int fd, SimSegment* s) { return new SimState(std::move(p), fd, s); });
}

std::unique_ptr<SimState> SimState::OpenExisting(const std::string& path, std::string* error) {
  return Map(path, false, error,
             [](std::string p, int fd, SimSegment* s) { return new SimState(std::move(p), fd, s); });
}

bool SimState::IsAlive(int slot) {
  return fd_ >= 0 && IsByteLockedByOther(fd_, kLivenessLockBase + static_cast<uint64_t>(slot));
}

std::optional<int> SimState::RegisterProcess() {
  RobustLock lock(&segment_->table_mutex);
  ReapLocked();
  // Prefer never-used slots, then the one that exited longest ago, so that the statistics of
  // recently ended processes stay readable as long as possible.
  // A slot whose liveness lock is still held is passed over: its registrant was killed in here,
  // and a dying process's robust mutexes pass on before the kernel closes its files.
  bool locked[kMaxProcesses] = {};
  int chosen = -1;
  while (true) {
    chosen = -1;
    uint64_t oldest_end = UINT64_MAX;
    for (int i = 0; i < kMaxProcesses; ++i) {
      if (locked[i]) continue;
      const auto state = static_cast<SlotState>(segment_->slots[i].state.load());
      if (state == SlotState::kFree) {
        chosen = i;
        break;
      }
      if (state == SlotState::kExited && segment_->slots[i].ended_ns < oldest_end) {
        oldest_end = segment_->slots[i].ended_ns;
        chosen = i;
      }
    }
    if (chosen < 0) return std::nullopt;
    if (TryLockByte(fd_, kLivenessLockBase + static_cast<uint64_t>(chosen))) break;
    locked[chosen] = true;
  }
  SimProcessSlot& slot = segment_->slots[chosen];
  slot.pid = static_cast<int32_t>(getpid());
  slot.started_ns = MonotonicNanos();
  slot.ended_ns = 0;
  slot.generation += 1;
  std::memset(slot.command, 0, sizeof slot.command);
  // Its cgroup, for the driver's per-cgroup memory limits (sim/memory_partitioning.h).
  std::snprintf(segment_->partitioning.process_cgroup[chosen], kCgroupPathBytes, "%s", OwnCgroupPath().c_str());
  if (FILE* f = std::fopen("/proc/self/comm", "re")) {
    if (std::fgets(slot.command, sizeof slot.command, f)) slot.command[std::strcspn(slot.command, "\n")] = 0;
    std::fclose(f);
  }
  for (int d = 0; d < kMaxUnits; ++d) {
    SimProcessDeviceStats& stats = device(d).processes[chosen];
    stats.memory_used = 0;
    stats.busy_ns = 0;
    stats.kernels = 0;
    stats.contexts = 0;
    device(d).arbiter.wants[chosen] = 0;
  }
  slot.state.store(static_cast<uint32_t>(SlotState::kLive));
  own_slot_ = chosen;
  return chosen;
}

void SimState::ReleaseSlotLocked(int slot) {
  for (int d = 0; d < kMaxUnits; ++d) {
    SimDevice& unit = device(d);
    unit.processes[slot].memory_used = 0;
    unit.processes[slot].contexts = 0;
    if (unit.arbiter.wants[slot].exchange(0)) unit.arbiter.waiting.fetch_sub(1);
  }
  // SMs a dead MPS client's kernels held go back to its server.
  for (int d = 0; d < kMaxDevices; ++d) {
    SimMpsDevice& mps = segment_->mps.devices[d];
    if (const uint32_t held = mps.sms_held[slot].exchange(0); held != 0) {
      mps.sms_free.fetch_add(static_cast<int32_t>(held));
      mps.sequence.fetch_add(1);
      FutexWakeAll(&mps.sequence);
    }
  }
  segment_->slots[slot].ended_ns = MonotonicNanos();
  segment_->slots[slot].state.store(static_cast<uint32_t>(SlotState::kExited));
}

void SimState::UnregisterProcess(int slot) {
  if (slot < 0) return;
  RobustLock lock(&segment_->table_mutex);
  ReleaseSlotLocked(slot);
  UnlockByte(fd_, kLivenessLockBase + static_cast<uint64_t>(slot));
  own_slot_ = -1;
}

bool SimState::IsLiveSlot(int slot) const {
  return slot >= 0 && slot < kMaxProcesses &&
         static_cast<SlotState>(segment_->slots[slot].state.load()) == SlotState::kLive;
}

void SimState::ReapLocked() {
  for (int i = 0; i < kMaxProcesses; ++i) {
    // Our own lock does not conflict with our own open file description, so our slot would
    // look dead to us: skip it.
    if (i == own_slot_) continue;
    if (static_cast<SlotState>(segment_->slots[i].state.load()) != SlotState::kLive) continue;
    if (!IsAlive(i)) ReleaseSlotLocked(i);
  }
}

void SimState::ReapDeadProcesses() {
  RobustLock lock(&segment_->table_mutex);
  ReapLocked();
}

uint64_t SimState::SumMemoryLocked(int ordinal) {
  uint64_t used = 0;
  for (const auto& stats : device(ordinal).processes) used += stats.memory_used.load();
  return used;
}

bool SimState::ChargeMemory(int ordinal, int slot, uint64_t bytes, uint64_t own_limit) {
  RobustLock lock(&segment_->table_mutex);
  ReapLocked();
  const uint64_t own = device(ordinal).processes[slot].memory_used.load();
  if (own_limit != 0 && (bytes > own_limit || own > own_limit - bytes)) return false;
  const uint64_t used = SumMemoryLocked(ordinal);
  const uint64_t total = device(ordinal).config.total_memory;
  if (bytes > total || used > total - bytes) return false;
  // The driver's hard limits of the process's cgroup and its ancestors (driver r615 and later).
  const CgroupRoom room = CgroupRoomLocked(*this, ordinal, segment_->partitioning.process_cgroup[slot]);
  // sabotage-point: driver-cgroup-limits-off
  if (bytes > room.left) return false;
  device(ordinal).processes[slot].memory_used.fetch_add(bytes);
  return true;
}

void SimState::CreditMemory(int ordinal, int slot, uint64_t bytes) {
  RobustLock lock(&segment_->table_mutex);
  auto& used = device(ordinal).processes[slot].memory_used;
  used.store(used.load() >= bytes ? used.load() - bytes : 0);
}

uint64_t SimState::MemoryUsed(int ordinal) {
  RobustLock lock(&segment_->table_mutex);
  ReapLocked();
  return SumMemoryLocked(ordinal);
}

void SimState::CloseInheritedDescriptor() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
  own_slot_ = -1;
}

}  // namespace gpuslice::sim
