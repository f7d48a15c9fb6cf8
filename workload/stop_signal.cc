#include "workload/stop_signal.h"

#include <signal.h>
#include <time.h>

#include <algorithm>
#include <atomic>

namespace gpuslice::workload {
namespace {

std::atomic<bool> g_stop{false};
static_assert(std::atomic<bool>::is_always_lock_free, "set from a signal handler");

void OnStopSignal(int) { g_stop.store(true, std::memory_order_relaxed); }

// A signal landing between the check and the sleep is noticed within one slice.
constexpr auto kSleepSlice = std::chrono::milliseconds(20);

}  // namespace

void InstallStopHandlers() {
  struct sigaction action = {};
  action.sa_handler = OnStopSignal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
}

bool StopRequested() { return g_stop.load(std::memory_order_relaxed); }

bool SleepUntil(Clock::time_point deadline) {
  while (!StopRequested()) {
    const auto now = Clock::now();
    if (now >= deadline) return true;
    // steady_clock is CLOCK_MONOTONIC in libstdc++; an absolute wake-up does not drift.
    const auto wake = std::min(deadline, now + kSleepSlice);
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(wake.time_since_epoch()).count();
    const timespec ts = {static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
    clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr);  // EINTR just ends the nap early
  }
  return false;
}

}  // namespace gpuslice::workload
