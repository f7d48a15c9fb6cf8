// Futex wait/wake on a 32-bit word in memory shared between processes.
#pragma once

#include <atomic>
#include <cstdint>

namespace gpuslice {

// Sleeps while *word == expected, at most timeout_ns. Returns false when the timeout expired.
// Spurious returns are allowed: callers re-check their condition.
bool FutexWait(std::atomic<uint32_t>* word, uint32_t expected, uint64_t timeout_ns);

// Wakes every waiter sleeping on word, in any process that maps it.
void FutexWakeAll(std::atomic<uint32_t>* word);

}  // namespace gpuslice
