// CSV readers for the trace's node and pod lists. Columns are found by their header names, so
// both pod formats (11 columns, or the multigpu lists' first 5) read through one path.
#include <charconv>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "place/trace.h"

namespace gpuslice::place {
namespace {

struct Row {
  int line = 0;
  std::vector<std::string> fields;
};

// "<path>:<line>:<column>: <what>", an error in the file at that place.
template <typename... Args>
Status Invalid(const std::string& path, int line, int column, fmt::format_string<Args...> what, Args&&... args) {
  return Status::InvalidArgument(
      fmt::format("{}:{}:{}: {}", path, line, column, fmt::format(what, std::forward<Args>(args)...)));
}

std::vector<std::string> SplitFields(const std::string& text) {
  std::vector<std::string> fields;
  std::string field;
  std::istringstream in(text);
  while (std::getline(in, field, ',')) fields.push_back(field);
  if (!text.empty() && text.back() == ',') fields.emplace_back();
  if (text.empty()) fields.emplace_back();
  return fields;
}

// The header's column positions by name, and the data rows. Blank lines are skipped.
struct Table {
  std::map<std::string, int> column;
  std::vector<Row> rows;
};

Result<Table> ReadTable(const std::string& path, const std::vector<std::string>& required) {
  std::ifstream in(path);
  if (!in) return Status::NotFound(fmt::format("{}: cannot open the file", path));
  Table table;
  std::string text;
  int line = 0;
  bool have_header = false;
  size_t width = 0;
  while (std::getline(in, text)) {
    ++line;
    if (!text.empty() && text.back() == '\r') text.pop_back();
    if (text.empty()) continue;
    std::vector<std::string> fields = SplitFields(text);
    if (!have_header) {
      for (size_t i = 0; i < fields.size(); ++i) table.column[fields[i]] = static_cast<int>(i);
      for (const std::string& name : required) {
        if (!table.column.count(name)) {
          return Invalid(path, line, static_cast<int>(fields.size()) + 1,
                         "missing column '{}' in the header (it needs: {})", name, fmt::join(required, ","));
        }
      }
      width = fields.size();
      have_header = true;
      continue;
    }
    if (fields.size() != width) {
      int column = static_cast<int>(std::min(fields.size(), width)) + 1;
      return Invalid(path, line, column, "expected {} fields as in the header, found {}", width, fields.size());
    }
    table.rows.push_back(Row{line, std::move(fields)});
  }
  if (!have_header) return Invalid(path, 1, 1, "the file is empty (expected a header line)");
  if (table.rows.empty()) return Invalid(path, line + 1, 1, "no rows after the header");
  return table;
}

// Reads a whole non-negative integer no larger than `max`; on failure says what was found.
Status ReadCount(const std::string& path, const Row& row, int column, const char* name, int64_t max, int64_t* out) {
  const std::string& text = row.fields[static_cast<size_t>(column)];
  int64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) {
    return Invalid(path, row.line, column + 1, "{} must be a whole number, found '{}'", name, text);
  }
  if (value < 0) return Invalid(path, row.line, column + 1, "{} must not be negative, found {}", name, text);
  if (value > max) {
    return Invalid(path, row.line, column + 1, "{} {} is above the largest valid value {}", name, text, max);
  }
  *out = value;
  return Status::Ok();
}

// Timing columns may be empty in the trace; empty reads as -1 (unknown).
Status ReadTime(const std::string& path, const Row& row, int column, const char* name, int64_t* out) {
  if (row.fields[static_cast<size_t>(column)].empty()) {
    *out = -1;
    return Status::Ok();
  }
  return ReadCount(path, row, column, name, INT64_MAX / 2, out);
}

}  // namespace

Result<std::vector<NodeSpec>> ReadNodeList(const std::string& path) {
  auto table_or = ReadTable(path, {"sn", "cpu_milli", "memory_mib", "gpu", "model"});
  if (!table_or.ok()) return table_or.status();
  const Table& table = *table_or;
  const int sn = table.column.at("sn"), cpu = table.column.at("cpu_milli"), mem = table.column.at("memory_mib"),
            gpu = table.column.at("gpu"), model = table.column.at("model");
  std::vector<NodeSpec> nodes;
  std::set<std::string> names;
  for (const Row& row : table.rows) {
    NodeSpec node;
    node.name = row.fields[static_cast<size_t>(sn)];
    if (node.name.empty()) return Invalid(path, row.line, sn + 1, "empty node name");
    if (!names.insert(node.name).second) return Invalid(path, row.line, sn + 1, "node '{}' listed twice", node.name);
    int64_t gpus = 0;
    Status read = ReadCount(path, row, cpu, "cpu_milli", INT64_MAX / 4, &node.cpu_milli);
    if (read.ok()) read = ReadCount(path, row, mem, "memory_mib", INT64_MAX / 4, &node.memory_mib);
    if (read.ok()) read = ReadCount(path, row, gpu, "gpu", kMaxGpusPerNode, &gpus);
    if (!read.ok()) return read;
    node.gpus = static_cast<int>(gpus);
    node.model = row.fields[static_cast<size_t>(model)];
    if (node.model == "nan") node.model.clear();
    if (node.gpus > 0 && node.model.empty()) {
      return Invalid(path, row.line, model + 1, "a node with GPUs needs its GPU model");
    }
    nodes.push_back(std::move(node));
  }
  return nodes;
}

Result<std::vector<PodSpec>> ReadPodList(const std::string& path) {
  auto table_or = ReadTable(path, {"name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli"});
  if (!table_or.ok()) return table_or.status();
  const Table& table = *table_or;
  // The required columns are there (ReadTable checked); the optional ones may not be.
  auto column = [&](const char* name) -> std::optional<int> {
    const auto it = table.column.find(name);
    return it == table.column.end() ? std::nullopt : std::optional<int>(it->second);
  };
  const int name = table.column.at("name"), cpu = table.column.at("cpu_milli"), mem = table.column.at("memory_mib"),
            num = table.column.at("num_gpu"), milli = table.column.at("gpu_milli");
  const std::optional<int> spec = column("gpu_spec"), created = column("creation_time"),
                           deleted = column("deletion_time"), qos = column("qos");
  std::vector<PodSpec> pods;
  for (const Row& row : table.rows) {
    PodSpec pod;
    pod.line = row.line;
    pod.name = row.fields[static_cast<size_t>(name)];
    if (pod.name.empty()) return Invalid(path, row.line, name + 1, "empty pod name");
    int64_t num_gpu = 0, gpu_milli = 0;
    Status read = ReadCount(path, row, cpu, "cpu_milli", INT64_MAX / 4, &pod.cpu_milli);
    if (read.ok()) read = ReadCount(path, row, mem, "memory_mib", INT64_MAX / 4, &pod.memory_mib);
    if (read.ok()) read = ReadCount(path, row, num, "num_gpu", kMaxGpusPerNode, &num_gpu);
    if (read.ok()) read = ReadCount(path, row, milli, "gpu_milli", kMilliPerGpu, &gpu_milli);
    if (!read.ok()) return read;
    pod.num_gpu = static_cast<int>(num_gpu);
    pod.gpu_milli = static_cast<int>(gpu_milli);
    if (pod.num_gpu > 0 && pod.gpu_milli == 0) {
      return Invalid(path, row.line, milli + 1,
                     "a pod asking for {} GPU(s) needs gpu_milli between 1 and 1000, found 0", pod.num_gpu);
    }
    if (pod.num_gpu == 0 && pod.gpu_milli > 0) {
      return Invalid(path, row.line, milli + 1, "gpu_milli {} given for a pod with num_gpu 0", pod.gpu_milli);
    }
    if (pod.num_gpu > 1 && pod.gpu_milli != kMilliPerGpu) {
      return Invalid(path, row.line, milli + 1,
                     "only a one-GPU pod may ask for a fraction; num_gpu {} needs gpu_milli 1000, found {}",
                     pod.num_gpu, pod.gpu_milli);
    }
    if (spec) {
      pod.gpu_spec_column = *spec + 1;
      std::string models = row.fields[static_cast<size_t>(*spec)];
      if (models == "nan") models.clear();
      std::istringstream in(models);
      std::string model;
      while (std::getline(in, model, '|')) {
        if (!model.empty()) pod.gpu_models.push_back(model);
      }
    }
    if (qos) {
      pod.qos = row.fields[static_cast<size_t>(*qos)];
      pod.qos_column = *qos + 1;
    }
    if (created) {
      if (Status s = ReadTime(path, row, *created, "creation_time", &pod.creation_time); !s.ok()) return s;
    }
    if (deleted) {
      if (Status s = ReadTime(path, row, *deleted, "deletion_time", &pod.deletion_time); !s.ok()) return s;
    }
    pods.push_back(std::move(pod));
  }
  return pods;
}

std::string CheckHasGpus(const std::string& node_path, const std::vector<NodeSpec>& nodes) {
  for (const NodeSpec& node : nodes) {
    if (node.gpus > 0) return {};
  }
  return fmt::format(
      "{}: none of its {} nodes has a GPU, so there is nothing to place GPUs on or to measure (the trace's GPU nodes are in openb_node_list_gpu_node.csv)",
      node_path, nodes.size());
}

}  // namespace gpuslice::place
