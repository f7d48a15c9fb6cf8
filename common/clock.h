// Monotonic time in nanoseconds; the one clock every timing in gpuslice uses.
#pragma once

#include <cstdint>
#include <ctime>

namespace gpuslice {

inline uint64_t MonotonicNanos() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ULL + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace gpuslice
