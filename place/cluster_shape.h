// Random cluster shapes, so that a placement policy can be judged on clusters nobody tuned it on.
// A shape is drawn from a seed within a family (what kind of cluster it is); any of its
// dimensions (GPU nodes, GPUs per node, models, CPU-only nodes, cores and memory per GPU) can be
// fixed instead. The GPU models are the trace's, so that pods pinned by gpu_spec mean something;
// a model a shape leaves out makes the pods pinned to it impossible (impossible.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "place/trace.h"

namespace gpuslice::place {

// What a shape fixes; everything left at its default is drawn from the seed by the family.
struct ShapeSpec {
  uint64_t seed = 1;
  std::string family;               // one of ShapeFamilies(); empty: drawn from the seed
  int gpu_nodes = 0;                // nodes with GPUs; 0: as many as 1,500-6,500 GPUs take
  std::vector<int> gpus_per_node;   // one node type per entry, 1..kMaxGpusPerNode GPUs each
  std::vector<std::string> models;  // the GPU models the types take, in turn
  double cpu_node_share = -1;       // nodes without GPUs, as a share of all nodes (< 0: drawn)
  double cores_per_gpu = 0;         // a GPU node's cores per GPU (0: drawn, 6-24)
  double memory_gib_per_gpu = 0;    // a GPU node's memory per GPU, GiB (0: drawn, 32-128)
};

// mixed (2-4 node types of 1-8 GPUs, 1-4 models), homogeneous (one type of 4-16 GPUs, one
// model), cpu-nodes (mixed, plus 10-40% nodes without GPUs), big-nodes (8-16 GPUs), small-nodes
// (1-4 GPUs).
const std::vector<std::string>& ShapeFamilies();
// The trace's GPU models, the ones shapes draw from.
const std::vector<std::string>& TraceGpuModels();

// "seed=7,family=mixed,nodes=400,gpus=8|16,models=G2|T4,cpu-nodes=0.2,cores-per-gpu=12,
// memory-per-gpu=64" (every field optional); an error names the field and what would be valid.
Result<ShapeSpec> ParseShapeSpec(const std::string& text);

struct ClusterShape {
  std::string family;
  std::string description;  // one line: the node types and counts drawn
  std::vector<NodeSpec> nodes;
};
ClusterShape MakeClusterShape(const ShapeSpec& spec);

// The node list as the trace writes it (sn,cpu_milli,memory_mib,gpu,model).
std::string NodeListCsv(const std::vector<NodeSpec>& nodes);

}  // namespace gpuslice::place
