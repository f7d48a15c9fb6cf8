// The simulated GPUs' shared state: one fixed-layout file mapped by every process that uses the
// simulated driver (and read by the query API). It plays the part of the hardware and the
// kernel driver: device-wide memory capacity, which process is running on each device, and the
// per-process ground truth (busy time, kernel count, memory) that tests and benchmarks measure.
//
// Layout rules: only fixed-size arrays of trivially copyable fields and lock-free atomics, no
// pointers. Any change to a struct below, its order or its sizes, bumps kSimLayoutVersion;
// tests/sim/sim_state_layout_test.cc pins the sizes and offsets so a change cannot go unnoticed.
// A process that finds another magic, version or size refuses the file.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "common/robust_mutex.h"

namespace gpuslice::sim {

inline constexpr uint64_t kSimMagic = 0x31534D4953435047ULL;  // "GPCSIMS1" little-endian
inline constexpr uint32_t kSimLayoutVersion = 3;              // 2: MIG, MPS (SimSegment.mig, .mps), SimDevice.lost;
                                                              // 3: memory partitioning (SimSegment.partitioning)
inline constexpr int kMaxDevices = 8;
inline constexpr int kMaxProcesses = 256;
// Process liveness: a live process holds an OFD lock on byte kLivenessLockBase + slot.
inline constexpr uint64_t kLivenessLockBase = 1ULL << 32;

enum class SlotState : uint32_t {
  kFree = 0,    // never used
  kLive = 1,    // a running process owns it (and holds its liveness lock)
  kExited = 2,  // the process ended; its statistics stay readable until the slot is reused
};

struct SimDeviceConfig {
  char name[96];
  uint8_t uuid[16];
  uint64_t total_memory;    // bytes
  uint64_t timeslice_ns;    // how long one context runs before another waiting one is let in
  uint64_t context_memory;  // bytes a context takes from the device, as on real hardware
  int32_t sm_count;
  int32_t cc_major;
  int32_t cc_minor;
  int32_t pci_bus_id;
};

// Per process and device. Written only by the owning process (or by the reaper after it died).
struct SimProcessDeviceStats {
  std::atomic<uint64_t> memory_used;  // device bytes held: allocations, pools, contexts
  std::atomic<uint64_t> busy_ns;      // device time its kernels occupied
  std::atomic<uint64_t> kernels;      // kernels completed
  std::atomic<uint64_t> contexts;     // contexts alive on this device
};

// Hardware time-slicing between contexts, modelled per device (see docs/simulator.md).
struct SimArbiter {
  std::atomic<uint32_t> owner;     // process slot + 1 that runs on the device; 0 = idle
  std::atomic<uint32_t> sequence;  // futex word: bumped on every hand-over
  std::atomic<uint32_t> waiting;   // number of slots with wants[] set
  uint32_t reserved;
  std::atomic<uint64_t> owner_since_ns;
  std::atomic<uint64_t> handovers;
  std::atomic<uint8_t> wants[kMaxProcesses];  // slot has work queued for this device
};

struct SimDevice {
  SimDeviceConfig config;
  SimArbiter arbiter;
  std::atomic<uint64_t> busy_ns;  // total time some kernel occupied the device
  SimProcessDeviceStats processes[kMaxProcesses];
  // Nonzero: the GPU has fallen off the bus (an XID 79 on real hardware). The simulated NVML
  // then answers NVML_ERROR_GPU_IS_LOST for the device; set by `gpuslice-sim gpu-lost`.
  std::atomic<uint32_t> lost;
  // Fault injection: the last XID the driver reported for the GPU (low 16 bits) and how many it
  // reported (high 16 bits, so that the same XID twice is two events); 0: none yet. The
  // simulated NVML delivers each new one as an nvmlEventTypeXidCriticalError event. Took the
  // place of a reserved word: the layout is unchanged.
  std::atomic<uint32_t> xid;
};

struct SimProcessSlot {
  std::atomic<uint32_t> state;  // SlotState
  int32_t pid;                  // as seen by the process itself (informational only)
  uint64_t started_ns;          // CLOCK_MONOTONIC at registration
  uint64_t ended_ns;            // when it was seen to exit (0 while live)
  uint64_t generation;          // bumped each time the slot is reused
  char command[32];
};

// ---- Issue 10: MIG instances and MPS. Kept in one block, after everything above, so that other
// additions to the layout merge beside it. ----

// -- MIG --

inline constexpr int kMaxMigInstancesPerGpu = 7;
inline constexpr int kMaxMigInstances = kMaxDevices * kMaxMigInstancesPerGpu;
// What a process can run on: a whole device (0 .. kMaxDevices-1) or a MIG instance
// (kMaxDevices + instance index). SimState::unit() maps one to its SimDevice.
inline constexpr int kMaxUnits = kMaxDevices + kMaxMigInstances;

struct SimMigInstance {
  int32_t gpu;              // the physical device it is carved from
  int32_t gpu_instance_id;  // GI id within that GPU, as nvidia-smi numbers them (1, 2, ...)
  int32_t nvml_profile;     // NVML_GPU_INSTANCE_PROFILE_*
  int32_t start;            // first memory slice of its placement
  int32_t compute_slices;
  int32_t memory_slices;
  char profile[16];  // "3g.71gb"
};

struct SimMig {
  uint32_t instance_count;
  uint32_t enabled_gpus;  // bit g: device g is in MIG mode (CUDA sees its instances, not it)
  SimMigInstance instances[kMaxMigInstances];
  // One per instance: its configuration (own memory, SMs, "MIG-" UUID), its own time-slicing
  // arbiter and per-process ground truth, exactly as a whole device has.
  SimDevice units[kMaxMigInstances];
};

// -- MPS: a server per device; clients' kernels share its SMs at once --

struct SimMpsDevice {
  std::atomic<int32_t> sms_free;           // SMs no client kernel holds
  std::atomic<uint32_t> sequence;          // futex word: bumped whenever SMs are given back
  std::atomic<uint32_t> fault_generation;  // bumped by every fatal fault of a client
  uint32_t reserved;
  std::atomic<uint32_t> sms_held[kMaxProcesses];  // per process slot, returned by the reaper
};

struct SimMps {
  uint32_t enabled_gpus;  // bit g: an MPS server runs on device g (GPUSLICE_SIM_MPS)
  uint32_t reserved;
  SimMpsDevice devices[kMaxDevices];
};

// -- MPS v3 memory partitioning (driver r615): per-cgroup hard and soft limits, set through NVML
// (sim/memory_partitioning.h). Everything below is read and written under table_mutex. --

inline constexpr uint32_t kPartitioningDriverBranch = 615;  // the first driver branch that has it
inline constexpr int kMaxCgroupLimits = 64;
inline constexpr int kCgroupPathBytes = 512;  // "/sys/fs/cgroup/kubepods.slice/..." with its NUL

struct SimCgroupLimit {
  uint32_t in_use;              // 1: the entry holds a limit
  int32_t unit;                 // the whole device it is set on
  uint64_t soft;                // bytes: the guarantee; over it a process is an eviction candidate
  uint64_t hard;                // bytes: allocations past it fail with CUDA_ERROR_OUT_OF_MEMORY
  char path[kCgroupPathBytes];  // the cgroup, as NVML's nameSpace names it
};

struct SimPartitioning {
  uint32_t driver_branch;  // the simulated driver's branch (GPUSLICE_SIM_DRIVER_VERSION): 580, 615, ...
  uint32_t reserved;
  SimCgroupLimit limits[kMaxCgroupLimits];
  // The cgroup each process slot's process is in, read from /proc/self/cgroup when it registered.
  char process_cgroup[kMaxProcesses][kCgroupPathBytes];
};

struct SimSegment {
  uint64_t magic;
  uint32_t layout_version;
  uint32_t device_count;
  uint64_t segment_size;
  uint64_t created_ns;
  RobustMutex table_mutex;  // guards slot claims, memory charges and reaping
  SimProcessSlot slots[kMaxProcesses];
  SimDevice devices[kMaxDevices];
  SimMig mig;  // issue 10: MIG instances (block above)
  SimMps mps;  // issue 10: MPS servers (block above)
  SimPartitioning partitioning;
};

static_assert(std::atomic<uint64_t>::is_always_lock_free);
static_assert(std::atomic<uint32_t>::is_always_lock_free);

}  // namespace gpuslice::sim
