// The exporter's /metrics page: the broker's snapshot and NVML's device figures in Prometheus's
// text exposition format (version 0.0.4). A pure function of its input, so the scrape benchmark
// and the tests render exactly what the server serves. docs/observability.md lists every metric.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "broker/broker.h"

namespace gpuslice::exporter {

// One device as NVML reports it (nvml_devices.h).
struct DeviceFigures {
  std::string uuid;                 // "GPU-..." (the broker's gpu label)
  std::string name;
  int index = 0;
  unsigned long long memory_total = 0;
  unsigned long long memory_used = 0;
  std::optional<unsigned int> utilization_pct;  // absent when NVML does not support it
  std::optional<unsigned int> processes;        // compute processes running on it
  // Those processes: pid (the node's PID namespace, as NVML reports it) and device memory.
  struct Process {
    unsigned int pid = 0;
    unsigned long long memory_used = 0;
  };
  std::vector<Process> process_list;
};

struct ScrapeInput {
  const broker::Snapshot* snapshot = nullptr;  // nullptr: the segment could not be read
  const std::vector<DeviceFigures>* devices = nullptr;  // nullptr: NVML is not available
};

// Appends the exposition text to *out (cleared first). Every family has HELP and TYPE lines;
// families without samples are omitted.
void RenderMetrics(const ScrapeInput& input, std::string* out);

// A label value escaped as the format requires (backslash, double quote, line feed).
std::string EscapeLabelValue(const std::string& value);

}  // namespace gpuslice::exporter
