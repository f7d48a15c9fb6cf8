// The command line's figures, one struct per kind, filled in by command_line.cc.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace gpuslice::workload {

struct CommonOptions {
  int device = 0;
  std::string label;             // echoed in every output line when set
  bool ready_line = false;       // print {"event":"ready"} once the context exists
  double report_interval_s = 0;  // progress lines every this many seconds; 0 = none
};

// How many SMs a spin kernel asks for: narrow = one single-thread block (one SM, the same length
// on any GPU or share of one); wide = as many single-thread blocks as the device holds at once
// (SMs x resident blocks per SM), one wave alone, longer on fewer SMs (docs/simulator.md).
enum class KernelWidth { kNarrow, kWide };
inline constexpr const char* kKernelWidthNames[] = {"narrow", "wide"};

struct ComputeOptions {
  KernelWidth width = KernelWidth::kNarrow;
  uint64_t kernel_us = 1000;
  int depth = 2;
  double duration_s = 5;
  std::optional<uint64_t> kernels;      // when set, stop after this many instead of duration_s
  std::optional<double> fault_after_s;  // when set, launch a faulting kernel this long after the start
  // When set, the run launches on a thread of its own and the main thread calls exit(0) this long
  // after the start: a process that ends normally while a thread of it may wait for the GPU.
  std::optional<double> exit_after_s;
  // When set, one kernel is launched and waited for on this device before the run uses --device:
  // a process that works on two GPUs (a probe of device 0 first, a pipeline, device_map="auto").
  std::optional<int> first_on_device;
  // Launching threads, each with a stream of its own and `depth` kernels queued on it (a trainer
  // that launches from several threads: a pipeline, per-layer streams, a data-parallel loop).
  int threads = 1;
};

struct LatencyOptions {
  KernelWidth width = KernelWidth::kNarrow;
  double period_ms = 10;
  int kernels_per_request = 3;
  bool dependent = false;    // wait for each kernel before launching the next (a decode loop)
  uint64_t host_gap_us = 0;  // with dependent: host time between a kernel's end and the next launch
  uint64_t kernel_us = 200;
  double duration_s = 5;
  std::optional<uint64_t> requests;  // when set, stop after this many instead of duration_s
  std::string latencies_file;        // when set, every recorded latency (us) is written there, one a line
  double warmup_s = 0;               // requests submitted this long after the start are run, not recorded
};

// steps: a step of kernels launched back to back on one stream, then a synchronisation — an LLM
// decode step, or a launch-bound service's burst.
struct StepsOptions {
  int kernels_per_step = 16;
  uint64_t kernel_us_min = 20;  // each kernel's length is drawn from [min, max] once per run
  uint64_t kernel_us_max = 20;
  bool graph = false;    // the step is captured once into a CUDA graph and launched as one
  double period_ms = 0;  // 0: steps back to back; else one step every period
  double duration_s = 5;
  std::optional<uint64_t> steps;  // when set, stop after this many instead of duration_s
  uint64_t seed = 1;              // the kernel lengths' draw
  std::string latencies_file;     // when set, every step's latency (us) is written there, one a line
};

enum class MemoryApi { kAlloc, kPitch, kManaged, kAsync, kPool, kVmm, kArray };
// --api spellings, in the enum's order.
inline constexpr const char* kMemoryApiNames[] = {"alloc", "pitch", "managed", "async", "pool", "vmm", "array"};
inline const char* MemoryApiName(MemoryApi api) { return kMemoryApiNames[static_cast<int>(api)]; }

struct MemoryOptions {
  MemoryApi api = MemoryApi::kAlloc;
  uint64_t chunk_bytes = 64ULL << 20;
  uint64_t count = 1;
  double hold_s = 0;
  bool touch = false;
};

}  // namespace gpuslice::workload
