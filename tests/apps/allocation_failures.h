// An allocation-failure injector for one process: the program that links it (allocation_failures.cc)
// defines malloc, calloc, realloc, the aligned allocators and pthread_create, and so replaces them
// for every library of the process (the simulated libcuda and libnvidia-ml, libstdc++'s operator
// new, std::thread). Armed, it refuses every allocation after the next `after` (ENOMEM, so that
// operator new throws std::bad_alloc) and, when asked, every new thread (EAGAIN, so that
// std::thread throws std::system_error), in every thread, until disarmed.
#pragma once

#include <cstdint>

namespace gpuslice::testapp {

void FailAllocationsAfter(int64_t after);
void FailThreadCreation(bool fail);
void Disarm();
// Allocations and threads refused since the last FailAllocationsAfter.
int64_t Refused();

}  // namespace gpuslice::testapp
