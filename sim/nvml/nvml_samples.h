// Utilisation from samples, as the driver derives it: a busy-time counter read at two moments,
// and the busy fraction between them. Timestamps are microseconds since the epoch (NVML's
// timeline); the simulated GPUs count busy time on CLOCK_MONOTONIC, which Clocks places on it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace gpuslice::sim::nvml {

struct Sample {
  uint64_t time_us;  // microseconds since the epoch, as NVML timestamps are
  uint64_t busy_ns;
};

uint64_t RealtimeNanos();

// Now on both clocks, to place the state's CLOCK_MONOTONIC times on NVML's epoch timeline.
struct Clocks {
  uint64_t now_us;
  int64_t epoch_minus_monotonic_ns;
  uint64_t ToEpochMicros(uint64_t monotonic_ns) const {
    return static_cast<uint64_t>(static_cast<int64_t>(monotonic_ns) + epoch_minus_monotonic_ns) / 1000;
  }
};
Clocks ReadClocks();

// The busy fraction between `base` and now, in percent (0-100, rounded).
unsigned int Percent(uint64_t busy_ns, uint64_t now_us, const Sample& base);

// The newest sample taken at or before `time_us`, or `origin` (a point known exactly, such as
// registration with zero busy time) when there is none.
Sample BaselineAt(const std::vector<Sample>& samples, uint64_t time_us, const Sample& origin);

// Appends `sample` unless it is not newer than the last; keeps the newest kMaxSamples: enough
// for pollers that name a timestamp from a few dozen queries back (older names get the oldest
// sample kept).
inline constexpr size_t kMaxSamples = 64;
void Record(std::vector<Sample>* samples, Sample sample);

}  // namespace gpuslice::sim::nvml
