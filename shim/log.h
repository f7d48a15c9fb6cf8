// One-line messages on stderr, prefixed "gpuslice: ". The shim writes nothing else anywhere.
#pragma once

namespace gpuslice::shim {

// printf-style; appends the newline. Safe to call from any thread; never allocates.
void LogError(const char* format, ...) __attribute__((format(printf, 1, 2)));

}  // namespace gpuslice::shim
