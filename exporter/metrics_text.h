// The exporter's /metrics page: the broker's snapshot and NVML's device figures in Prometheus's
// text exposition format (version 0.0.4). A pure function of its input, so the scrape benchmark
// and the tests render exactly what the server serves. docs/observability.md lists every metric.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "broker/snapshot.h"
#include "common/pod_names.h"
#include "gpu/nvml_devices.h"

namespace gpuslice::exporter {

// One device as NVML reports it (gpu/nvml_devices.h).
using gpu::DeviceFigures;

struct ScrapeInput {
  const broker::Snapshot* snapshot = nullptr;           // nullptr: the segment could not be read
  const std::vector<DeviceFigures>* devices = nullptr;  // nullptr: NVML is not available
  const PodNames* pods = nullptr;                       // the device plugin's tenant -> pod map; nullptr: none
  // Tenants (SeriesKey) whose series this exporter shows for the first time: their counters
  // read 0 in this scrape (FirstSight below).
  const std::set<std::string>* first_seen = nullptr;
};

// The key of one tenant's series on one GPU.
std::string SeriesKey(const broker::GpuView& gpu, const broker::TenantView& tenant);

// Prometheus computes rate() and increase() from two samples of a series, so a counter first
// scraped at 3 (a tenant refused three times before its first scrape: the usual way to go over
// a quota, at start) shows no increase and its alert never fires. A client library creates a
// counter at 0 when the series is created; the exporter does the same for the tenants it sees
// appear: a tenant absent from the previous scrape's snapshot shows its counters at 0 in its
// first scrape and their values from the next one on. Tenants already present at the
// exporter's first scrape are shown as they are (their series may exist in Prometheus from the
// exporter's previous run: a 0 would read as a counter reset).
class FirstSight {
 public:
  // The tenants of `snapshot` to show at 0 now; remembers the snapshot's tenants for next time.
  std::set<std::string> Update(const broker::Snapshot& snapshot);
  // A scrape without a snapshot (no state file yet): the exporter has started, and every tenant
  // that appears from now on is new; those already known stay known (a state file briefly
  // unreadable must not turn their counters to 0, which Prometheus would read as a reset).
  void UpdateWithoutSnapshot() { started_ = true; }

 private:
  bool started_ = false;
  std::set<std::string> known_;
};

// Appends the exposition text to *out (cleared first). Every family has HELP and TYPE lines;
// families without samples are omitted.
void RenderMetrics(const ScrapeInput& input, std::string* out);

// A label value escaped as the format requires (backslash, double quote, line feed).
std::string EscapeLabelValue(const std::string& value);

}  // namespace gpuslice::exporter
