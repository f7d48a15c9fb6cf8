#include "shim/compute_monitor.h"

#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <utility>

#include "shim/shim_state.h"

namespace gpuslice::shim {
namespace {

std::atomic<ShimState*> g_monitored{nullptr};

void* MonitorLoop(void* arg) {
  auto* state = static_cast<ShimState*>(arg);
  while (g_monitored.load() == state) {
    uint64_t sleep_ns = 5'000'000;
    const auto gates = state->Gates();
    for (broker::ComputeGate* gate : gates) {
      if (!gate->gated()) continue;
      std::pair<ShimState*, broker::ComputeGate*> target{state, gate};
      auto synchronize = [](void* context) {
        auto* t = static_cast<std::pair<ShimState*, broker::ComputeGate*>*>(context);
        t->first->SynchronizeGate(t->second);
      };
      sleep_ns = std::min(sleep_ns, gate->Monitor(synchronize, &target));
    }
    if (!gates.empty()) gates.front()->WaitForChange(sleep_ns);
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
  pthread_t thread;
  if (pthread_create(&thread, nullptr, MonitorLoop, state) == 0) pthread_detach(thread);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

}  // namespace gpuslice::shim
