#include "shim/compute_monitor.h"

#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>

#include "common/clock.h"
#include "shim/real_driver.h"
#include "shim/shim_state.h"

namespace gpuslice::shim {
namespace {

std::atomic<ShimState*> g_monitored{nullptr};
pthread_t g_thread;
pid_t g_thread_pid = 0;  // the process that started g_thread (a forked child has no such thread)

void* MonitorLoop(void* arg) {
  auto* state = static_cast<ShimState*>(arg);
  // Relaxed: the monitor's queries are never prohibited by, nor break, an application thread's
  // stream capture in the global mode (shim/stream_capture.h).
  if (const RealDriver* real = Real(); real && real->cuThreadExchangeStreamCaptureMode) {
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    real->cuThreadExchangeStreamCaptureMode(&mode);
  }
  while (g_monitored.load() == state) {
    uint64_t sleep_ns = 5'000'000;
    LaunchTracker* first = nullptr;
    // A step that runs out of memory is tried again at the next: the monitor never ends the
    // process (an exception leaving a thread's function would).
    try {
      state->ForEachTracker([&](LaunchTracker* tracker) {
        if (!first) first = tracker;
        if (tracker->gate()->gated()) sleep_ns = std::min(sleep_ns, tracker->MonitorStep(MonotonicNanos()));
      });
    } catch (...) {
      sleep_ns = 1'000'000;
    }
    if (g_monitored.load() != state) break;
    if (first) first->gate()->WaitForChange(sleep_ns);
  }
  return nullptr;
}

}  // namespace

void StartComputeMonitor(ShimState* state) {
  ShimState* expected = nullptr;
  if (g_monitored.load() == state) return;
  if (!g_monitored.compare_exchange_strong(expected, state)) {
    if (expected == state) return;
    g_monitored.store(state);  // a forked child's new state replaces the parent's
  }
  // The application's signals are not ours to receive: block them all in the monitor.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  if (pthread_create(&g_thread, nullptr, MonitorLoop, state) == 0) g_thread_pid = getpid();
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

bool StopComputeMonitor(ShimState* state) {
  ShimState* expected = state;
  if (!g_monitored.compare_exchange_strong(expected, nullptr)) return true;  // none running for it
  if (g_thread_pid != getpid()) return true;                                 // started in the parent: no thread here
  for (LaunchTracker* tracker : state->Trackers()) tracker->gate()->Wake();
  timespec deadline;
  clock_gettime(CLOCK_REALTIME, &deadline);
  deadline.tv_sec += 1;
  if (pthread_timedjoin_np(g_thread, nullptr, &deadline) != 0) return false;
  g_thread_pid = 0;
  return true;
}

}  // namespace gpuslice::shim
