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

// Nanoseconds from `since` to `now`; 0 when `since` is later (a stamp another process wrote, read
// against this process's clock reading, or a forged one).
inline uint64_t Elapsed(uint64_t since, uint64_t now) { return now > since ? now - since : 0; }

}  // namespace gpuslice
