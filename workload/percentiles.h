// Latency summaries by the nearest-rank method: every reported percentile is a latency that was
// actually observed, and p99.9 of fewer than 1000 samples is simply the maximum.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

namespace gpuslice::workload {

// `sorted` ascending and non-empty; q in (0, 1].
inline double NearestRank(const std::vector<double>& sorted, double q) {
  // The epsilon keeps 0.99 * 100 (not exactly 99 in binary) at rank 99.
  const auto rank = static_cast<size_t>(std::ceil(q * static_cast<double>(sorted.size()) - 1e-9));
  return sorted[std::clamp<size_t>(rank, 1, sorted.size()) - 1];
}

struct LatencySummary {
  size_t count = 0;
  double min = 0, mean = 0, p50 = 0, p90 = 0, p99 = 0, p999 = 0, max = 0;
};

inline LatencySummary Summarize(std::vector<double> samples) {
  LatencySummary s;
  if (samples.empty()) return s;
  std::sort(samples.begin(), samples.end());
  double sum = 0;
  for (double v : samples) sum += v;
  s.count = samples.size();
  s.min = samples.front();
  s.mean = sum / static_cast<double>(samples.size());
  s.p50 = NearestRank(samples, 0.50);
  s.p90 = NearestRank(samples, 0.90);
  s.p99 = NearestRank(samples, 0.99);
  s.p999 = NearestRank(samples, 0.999);
  s.max = samples.back();
  return s;
}

}  // namespace gpuslice::workload
