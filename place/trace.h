// The Alibaba GPU trace (cluster-trace-gpu-v2023) as the placement simulator reads it: GPU nodes
// and pod specifications. Sizes are in the trace's units: milli-CPU, MiB, milli-GPU (1000 = one
// GPU). Readers never throw: a bad file gives one error naming file, line and column.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace gpuslice::place {

inline constexpr int kMilliPerGpu = 1000;
// Nodes of up to 16 GPUs (10- and 16-GPU servers exist); a pod asks for at most a node's worth.
inline constexpr int kMaxGpusPerNode = 16;
// The artifact's normalising constants (open-gpu-share utils: MaxSpecCpu, MaxSpecGpu).
inline constexpr double kMaxSpecCpu = 128000.0;
inline constexpr double kMaxSpecGpu = 8000.0;

struct NodeSpec {
  std::string name;
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  int gpus = 0;
  std::string model;  // empty for a node without GPUs
};

struct PodSpec {
  std::string name;
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  int num_gpu = 0;
  int gpu_milli = 0;                    // per GPU; below 1000 only when num_gpu is 1
  std::vector<std::string> gpu_models;  // gpu_spec split at '|'; empty: any model
  int line = 0;                         // where the pod was read, for later errors
  int gpu_spec_column = 0;              // 1-based column of gpu_spec (0: none)
  // The trace's timing columns (absent, -1, in the 5-column format).
  int64_t creation_time = -1;
  int64_t deletion_time = -1;
  std::string qos;     // the trace's qos column (LS, BE, Burstable, Guaranteed); empty without it
  int qos_column = 0;  // 1-based (0: none)

  int64_t TotalGpuMilli() const { return int64_t{num_gpu} * gpu_milli; }
  bool IsFractional() const { return num_gpu == 1 && gpu_milli < kMilliPerGpu; }
};

// Bad input is an error (common/status.h) of one line: "file:line:column: what is wrong".
Result<std::vector<NodeSpec>> ReadNodeList(const std::string& path);
// Reads the 11-column list (name .. scheduled_time) or the 5-column one (name .. gpu_milli).
Result<std::vector<PodSpec>> ReadPodList(const std::string& path);
// A node list must have a GPU (the experiment measures GPUs); says so, naming the file, if not.
std::string CheckHasGpus(const std::string& node_path, const std::vector<NodeSpec>& nodes);

}  // namespace gpuslice::place
