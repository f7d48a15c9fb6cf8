// SIGTERM and SIGINT end a run early but cleanly: loops poll StopRequested() and the run still
// prints its result line (a benchmark stops its tenants this way and keeps their figures).
#pragma once

#include <chrono>

namespace gpuslice::workload {

using Clock = std::chrono::steady_clock;

void InstallStopHandlers();
bool StopRequested();

// Sleeps until `deadline` or until a stop is requested, whichever comes first; false if stopped.
bool SleepUntil(Clock::time_point deadline);

inline Clock::duration Seconds(double seconds) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

inline double SecondsBetween(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

}  // namespace gpuslice::workload
