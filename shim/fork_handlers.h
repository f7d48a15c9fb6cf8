// The shim's pthread_atfork handlers (defined in shim/shim_state.cc): over a fork() they hold the
// shim's process-wide locks (loading the real driver, looking up NVML, attaching to the broker,
// the UUID map), so that a child never inherits one held by a thread it does not have.
#pragma once

namespace gpuslice::shim {

// Registers the handlers, once per process. Called before each of those locks is first taken, so
// that a fork finds none held without its handlers registered. (Not at load, which would make the
// shim act in processes that never use CUDA. What is left: a fork() that began before the first
// registration runs only the handlers registered then, so a thread that registers and takes a
// lock in the microseconds between that fork's start and its copying the process is not waited
// for.)
void EnsureForkHandlers();

}  // namespace gpuslice::shim
