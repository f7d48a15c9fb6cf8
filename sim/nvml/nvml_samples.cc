#include "sim/nvml/nvml_samples.h"

#include <time.h>

#include <algorithm>

#include "common/clock.h"

namespace gpuslice::sim::nvml {

uint64_t RealtimeNanos() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ULL + static_cast<uint64_t>(ts.tv_nsec);
}

Clocks ReadClocks() {
  const uint64_t mono = gpuslice::MonotonicNanos();
  const uint64_t real = RealtimeNanos();
  return Clocks{real / 1000, static_cast<int64_t>(real) - static_cast<int64_t>(mono)};
}

unsigned int Percent(uint64_t busy_ns, uint64_t now_us, const Sample& base) {
  if (now_us <= base.time_us || busy_ns <= base.busy_ns) return 0;
  const double busy_us = static_cast<double>(busy_ns - base.busy_ns) / 1000.0;
  const double percent = 100.0 * busy_us / static_cast<double>(now_us - base.time_us);
  return static_cast<unsigned int>(std::min(100.0, percent + 0.5));
}

Sample BaselineAt(const std::vector<Sample>& samples, uint64_t time_us, const Sample& origin) {
  Sample base = origin;
  for (const Sample& s : samples) {
    if (s.time_us > time_us) break;
    if (s.time_us >= base.time_us) base = s;
  }
  return base;
}

void Record(std::vector<Sample>* samples, Sample sample) {
  if (!samples->empty() && samples->back().time_us >= sample.time_us) return;
  samples->push_back(sample);
  if (samples->size() > kMaxSamples) samples->erase(samples->begin());
}

}  // namespace gpuslice::sim::nvml
