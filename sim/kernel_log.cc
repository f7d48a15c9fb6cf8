#include "sim/kernel_log.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>

namespace gpuslice::sim {
namespace {

constexpr const char* kKernelLogVariable = "GPUSLICE_SIM_KERNEL_LOG";
constexpr int kUnopened = -2;  // -1: unset, or the file could not be opened

// No lock and no guarded static: kernels are scheduled on the simulator's stream threads, and a
// fork() may come at any time. Two threads opening at once leave one descriptor unused.
std::atomic<int> g_fd{kUnopened};
std::atomic<uint64_t> g_kernels{0};

int KernelLogFd() {
  int fd = g_fd.load(std::memory_order_acquire);
  if (fd != kUnopened) return fd;
  const char* path = getenv(kKernelLogVariable);
  int opened = -1;
  if (path && *path) {
    opened = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (opened < 0) fprintf(stderr, "gpuslice-sim: %s: cannot open %s for appending\n", kKernelLogVariable, path);
  }
  if (!g_fd.compare_exchange_strong(fd, opened) && opened >= 0) close(opened);
  return g_fd.load(std::memory_order_acquire);
}

}  // namespace

uint64_t NextLoggedKernel() { return KernelLogFd() < 0 ? 0 : g_kernels.fetch_add(1) + 1; }

void LogKernelStretch(int ordinal, uint64_t kernel, uint64_t start_ns, uint64_t end_ns) {
  if (kernel == 0) return;
  const int fd = KernelLogFd();
  if (fd < 0) return;
  char line[160];
  const int n = snprintf(line, sizeof line,
                         "{\"pid\":%d,\"device\":%d,\"kernel\":%llu,\"start_ns\":%llu,\"end_ns\":%llu}\n",
                         static_cast<int>(getpid()), ordinal, static_cast<unsigned long long>(kernel),
                         static_cast<unsigned long long>(start_ns), static_cast<unsigned long long>(end_ns));
  if (n > 0 && n < static_cast<int>(sizeof line)) (void)!write(fd, line, static_cast<size_t>(n));
}

}  // namespace gpuslice::sim
