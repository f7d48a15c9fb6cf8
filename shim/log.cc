#include "shim/log.h"

#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstring>

namespace gpuslice::shim {

void LogError(const char* format, ...) {
  char line[1024] = "gpuslice: ";
  const size_t prefix = std::strlen(line);
  va_list args;
  va_start(args, format);
  std::vsnprintf(line + prefix, sizeof line - prefix - 1, format, args);
  va_end(args);
  // Messages from the broker already carry the prefix: never print "gpuslice: gpuslice: ".
  if (std::strncmp(line + prefix, line, prefix) == 0)
    std::memmove(line + prefix, line + 2 * prefix, std::strlen(line + 2 * prefix) + 1);
  const size_t length = std::strlen(line);
  line[length] = '\n';
  // One write: lines from several threads never interleave.
  (void)!write(STDERR_FILENO, line, length + 1);
}

}  // namespace gpuslice::shim
