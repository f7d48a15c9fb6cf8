#include "place/cluster_shape.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <iterator>
#include <numeric>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "place/rng.h"

namespace gpuslice::place {
namespace {

constexpr int kMinGpus = 1500, kMaxGpus = 6500;  // a drawn cluster's GPUs (the trace's: 6,212)

// What a family draws from when the spec leaves a dimension open.
struct Family {
  const char* name;
  int min_types, max_types;
  std::vector<int> gpu_counts;  // a node type's GPUs, drawn from these
  int max_models;               // models drawn: 1..min(types, this)
  double min_cpu_nodes, max_cpu_nodes;
};

const std::vector<Family>& Families() {
  static const std::vector<Family> kFamilies = {
      {"mixed", 2, 4, {1, 2, 4, 8}, 4, 0, 0},         {"homogeneous", 1, 1, {4, 8, 10, 16}, 1, 0, 0},
      {"cpu-nodes", 2, 4, {1, 2, 4, 8}, 4, 0.1, 0.4}, {"big-nodes", 1, 3, {8, 10, 16}, 3, 0, 0},
      {"small-nodes", 2, 3, {1, 2, 4}, 3, 0, 0},
  };
  return kFamilies;
}

double Uniform(Rng& rng, double lo, double hi) {
  return lo + (hi - lo) * static_cast<double>(rng.Next() >> 11) / static_cast<double>(uint64_t{1} << 53);
}

int Between(Rng& rng, int lo, int hi) { return lo + static_cast<int>(rng.Below(static_cast<uint64_t>(hi - lo + 1))); }

template <class T>
const T& Pick(Rng& rng, const std::vector<T>& items) {
  return items[rng.Below(items.size())];
}

std::vector<std::string> Split(const std::string& text, char separator) {
  std::vector<std::string> items;
  std::istringstream in(text);
  for (std::string item; std::getline(in, item, separator);) items.push_back(item);
  return items;
}

std::string Invalid(const std::string& field, const std::string& valid) {
  return fmt::format("--random-cluster: '{}' is not valid; {}", field, valid);
}

bool ParseNumber(const std::string& text, double lo, double hi, double* out) {
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !(value >= lo && value <= hi)) return false;
  *out = value;
  return true;
}

// One field of the spec into *spec; empty, or the error line.
std::string ParseField(const std::string& field, ShapeSpec* spec) {
  const size_t eq = field.find('=');
  const std::string key = field.substr(0, eq), value = eq == std::string::npos ? "" : field.substr(eq + 1);
  double number = 0;
  if (key == "seed") {
    auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), spec->seed);
    if (value.empty() || ec != std::errc() || end != value.data() + value.size())
      return Invalid(field, "seed= takes a whole number");
  } else if (key == "family") {
    const auto& f = ShapeFamilies();
    if (std::find(f.begin(), f.end(), value) == f.end()) {
      return Invalid(field, fmt::format("family= takes one of {}", fmt::join(f, ", ")));
    }
    spec->family = value;
  } else if (key == "nodes") {
    if (!ParseNumber(value, 1, 100000, &number) || number != std::floor(number))
      return Invalid(field, "nodes= takes a whole number of GPU nodes from 1 to 100000");
    spec->gpu_nodes = static_cast<int>(number);
  } else if (key == "gpus") {
    for (const std::string& item : Split(value, '|')) {
      if (!ParseNumber(item, 1, kMaxGpusPerNode, &number) || number != std::floor(number))
        return Invalid(field, fmt::format("gpus= takes GPU counts from 1 to {}, e.g. 8|16", kMaxGpusPerNode));
      spec->gpus_per_node.push_back(static_cast<int>(number));
    }
  } else if (key == "models") {
    if (value.empty()) return Invalid(field, "models= takes GPU model names, e.g. G2|T4");
    for (const std::string& item : Split(value, '|')) {
      if (item.empty()) return Invalid(field, "models= takes GPU model names, e.g. G2|T4");
      spec->models.push_back(item);
    }
  } else if (key == "cpu-nodes") {
    if (!ParseNumber(value, 0, 0.9, &spec->cpu_node_share))
      return Invalid(field, "cpu-nodes= takes the share of nodes without GPUs, from 0 to 0.9");
  } else if (key == "cores-per-gpu") {
    if (!ParseNumber(value, 0.5, 512, &spec->cores_per_gpu))
      return Invalid(field, "cores-per-gpu= takes cores from 0.5 to 512");
  } else if (key == "memory-per-gpu") {
    if (!ParseNumber(value, 1, 65536, &spec->memory_gib_per_gpu))
      return Invalid(field, "memory-per-gpu= takes GiB from 1 to 65536");
  } else {
    return Invalid(field,
                   "fields are seed=, family=, nodes=, gpus=, models=, cpu-nodes=, cores-per-gpu=, memory-per-gpu=");
  }
  return {};
}

// A node type: GPUs and model, and its node's cores and memory.
struct NodeType {
  int gpus = 0;
  std::string model;
  int64_t cpu_milli = 0, memory_mib = 0;
  int count = 0;
};

int64_t RoundTo(double value, int64_t step) {
  return std::max<int64_t>(step, static_cast<int64_t>(std::llround(value / static_cast<double>(step))) * step);
}

// The node types: GPUs, model, cores and memory (the spec's, or drawn by the family).
std::vector<NodeType> DrawTypes(const ShapeSpec& spec, const Family& family, Rng& rng) {
  std::vector<int> gpus = spec.gpus_per_node;
  if (gpus.empty()) {
    const int types = Between(rng, family.min_types, family.max_types);
    for (int t = 0; t < types; ++t) gpus.push_back(Pick(rng, family.gpu_counts));
  }
  std::vector<std::string> models = spec.models;
  if (models.empty()) {
    std::vector<std::string> pool = TraceGpuModels();
    rng.Shuffle(pool);
    const int count = Between(rng, 1, std::min<int>(static_cast<int>(gpus.size()), family.max_models));
    models.assign(pool.begin(), pool.begin() + count);
  }
  const double cores = spec.cores_per_gpu > 0 ? spec.cores_per_gpu : 2.0 * Between(rng, 3, 12);
  const double memory = spec.memory_gib_per_gpu > 0 ? spec.memory_gib_per_gpu : 16.0 * Between(rng, 2, 8);
  std::vector<NodeType> types;
  for (size_t t = 0; t < gpus.size(); ++t) {
    // Node types differ around the cluster's ratios (the trace's: 4 to 52 cores per GPU) unless fixed.
    const double cpu_spread = spec.cores_per_gpu > 0 ? 1.0 : Pick(rng, std::vector<double>{0.75, 1.0, 1.0, 1.5});
    const double memory_spread = spec.memory_gib_per_gpu > 0 ? 1.0 : Pick(rng, std::vector<double>{1.0, 1.0, 2.0});
    NodeType type;
    type.gpus = gpus[t];
    type.model = models[t % models.size()];
    type.cpu_milli = RoundTo(type.gpus * cores * cpu_spread, 2) * 1000;
    type.memory_mib = RoundTo(type.gpus * memory * memory_spread, 16) * 1024;
    types.push_back(type);
  }
  return types;
}

// How many nodes of each type: shares drawn at random, scaled to the spec's GPU nodes or to a
// drawn number of GPUs.
void DrawCounts(const ShapeSpec& spec, Rng& rng, std::vector<NodeType>* types) {
  std::vector<double> weight;
  for (size_t t = 0; t < types->size(); ++t) weight.push_back(Uniform(rng, 0.2, 1.0));
  const double total = std::accumulate(weight.begin(), weight.end(), 0.0);
  const double gpus = Between(rng, kMinGpus, kMaxGpus);
  for (size_t t = 0; t < types->size(); ++t) {
    NodeType& type = (*types)[t];
    const double share = weight[t] / total;
    type.count = std::max(1, static_cast<int>(
                                 std::lround(spec.gpu_nodes > 0 ? spec.gpu_nodes * share : gpus * share / type.gpus)));
  }
}

}  // namespace

const std::vector<std::string>& ShapeFamilies() {
  static const std::vector<std::string> kNames = [] {
    std::vector<std::string> names;
    for (const Family& f : Families()) names.push_back(f.name);
    return names;
  }();
  return kNames;
}

const std::vector<std::string>& TraceGpuModels() {
  static const std::vector<std::string> kModels = {"T4", "P100", "V100M16", "V100M32", "G2", "G3", "A10"};
  return kModels;
}

Result<ShapeSpec> ParseShapeSpec(const std::string& text) {
  ShapeSpec spec;
  for (const std::string& field : Split(text, ',')) {
    if (field.empty()) continue;
    if (std::string bad = ParseField(field, &spec); !bad.empty()) return Status::InvalidArgument(bad);
  }
  return spec;
}

ClusterShape MakeClusterShape(const ShapeSpec& spec) {
  Rng rng(spec.seed ^ 0xc1a57e25ULL);
  const Family* family = &Families()[rng.Below(Families().size())];
  for (const Family& f : Families()) {
    if (f.name == spec.family) family = &f;
  }
  std::vector<NodeType> types = DrawTypes(spec, *family, rng);
  DrawCounts(spec, rng, &types);
  ClusterShape shape;
  shape.family = family->name;
  std::vector<std::string> kinds;
  int gpu_nodes = 0, index = 0;
  for (const NodeType& type : types) {
    for (int i = 0; i < type.count; ++i) {
      shape.nodes.push_back(
          NodeSpec{fmt::format("node-{}", index++), type.cpu_milli, type.memory_mib, type.gpus, type.model});
    }
    gpu_nodes += type.count;
    kinds.push_back(fmt::format("{} x {} {} ({} cores, {} GiB)", type.count, type.gpus, type.model,
                                type.cpu_milli / 1000, type.memory_mib / 1024));
  }
  const double cpu_share = spec.cpu_node_share >= 0 ? spec.cpu_node_share
                                                    : Uniform(rng, family->min_cpu_nodes, family->max_cpu_nodes);
  const int cpu_nodes = static_cast<int>(std::lround(gpu_nodes * cpu_share / (1.0 - cpu_share)));
  for (int i = 0; i < cpu_nodes; ++i) {
    const int64_t cores = Pick(rng, std::vector<int64_t>{32, 48, 64, 96, 128});
    shape.nodes.push_back(NodeSpec{fmt::format("node-{}", index++), cores * 1000,
                                   cores * Pick(rng, std::vector<int64_t>{4, 8}) * 1024, 0, ""});
  }
  if (cpu_nodes > 0) kinds.push_back(fmt::format("{} without GPUs", cpu_nodes));
  shape.description = fmt::format("{} (seed {}): {}", shape.family, spec.seed, fmt::join(kinds, ", "));
  return shape;
}

std::string NodeListCsv(const std::vector<NodeSpec>& nodes) {
  std::string out = "sn,cpu_milli,memory_mib,gpu,model\n";
  for (const NodeSpec& node : nodes) {
    fmt::format_to(std::back_inserter(out), "{},{},{},{},{}\n", node.name, node.cpu_milli, node.memory_mib, node.gpus,
                   node.model);
  }
  return out;
}

}  // namespace gpuslice::place
