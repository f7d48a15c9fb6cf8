// gpuslice-test-heap-exhausted-launch THREADS: new threads launching while memory allocation fails
// for gpuslice. A guest library must answer with error codes, never end the process: a thread's
// first launch on a shared GPU allocates its launch lane, a process's first on a GPU its gate.
//
// The injector: this program defines malloc, which fails — once armed — for every call made from
// inside libgpuslice.so (its operator new included: libstdc++ is linked into it), as it would when
// the heap is exhausted, and serves every other caller (the application, the driver). The main
// thread launches one kernel and waits for it (the shim's state for this GPU exists from then on),
// starts THREADS threads that wait at a barrier, arms the injector and releases them; each makes
// the context current and launches one kernel on the default stream. One JSON line:
// {"event":"result","codes":{"CUDA_SUCCESS":N,...}} — or the process dies (the test sees the
// signal).
#include <cuda.h>
#include <link.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

namespace {

constexpr const char* kPtx = R"(
.version 7.0
.target sm_70
.address_size 64
.visible .entry spin_ns(.param .u64 ns) { ret; }
)";

std::atomic<bool> g_armed{false};
uintptr_t g_shim_begin = 0, g_shim_end = 0;  // libgpuslice.so's loaded range (0, 0: not loaded)

int FindShim(dl_phdr_info* info, size_t, void*) {
  if (!info->dlpi_name || !std::strstr(info->dlpi_name, "libgpuslice.so")) return 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& segment = info->dlpi_phdr[i];
    if (segment.p_type != PT_LOAD) continue;
    const uintptr_t begin = info->dlpi_addr + segment.p_vaddr;
    if (g_shim_begin == 0 || begin < g_shim_begin) g_shim_begin = begin;
    g_shim_end = std::max<uintptr_t>(g_shim_end, begin + segment.p_memsz);
  }
  return 1;
}

}  // namespace

extern "C" void* __libc_malloc(size_t size);

// Interposes every malloc of the process (this executable comes first in the lookup order).
extern "C" void* malloc(size_t size) {
  if (g_armed.load(std::memory_order_relaxed)) {
    const auto caller = reinterpret_cast<uintptr_t>(__builtin_return_address(0));
    if (caller >= g_shim_begin && caller < g_shim_end) return nullptr;
  }
  return __libc_malloc(size);
}

int main(int argc, char** argv) {
  const int threads = argc == 2 ? std::atoi(argv[1]) : 0;
  if (threads <= 0) {
    std::fprintf(stderr, "usage: gpuslice-test-heap-exhausted-launch THREADS\n");
    return 2;
  }
  CUcontext ctx = nullptr;
  CUmodule module = nullptr;
  CUfunction spin = nullptr;
  uint64_t ns = 1000;
  void* params[] = {&ns};
  if (cuInit(0) != CUDA_SUCCESS || cuDevicePrimaryCtxRetain(&ctx, 0) != CUDA_SUCCESS ||
      cuCtxSetCurrent(ctx) != CUDA_SUCCESS || cuModuleLoadData(&module, kPtx) != CUDA_SUCCESS ||
      cuModuleGetFunction(&spin, module, "spin_ns") != CUDA_SUCCESS ||
      cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr) != CUDA_SUCCESS ||
      cuCtxSynchronize() != CUDA_SUCCESS) {
    std::fprintf(stderr, "gpuslice-test-heap-exhausted-launch: set-up failed\n");
    return 1;
  }
  std::mutex mutex;
  std::condition_variable go;
  bool released = false;
  std::vector<CUresult> results(static_cast<size_t>(threads), CUDA_ERROR_UNKNOWN);
  std::vector<std::thread> workers;
  for (int i = 0; i < threads; ++i) {
    workers.emplace_back([&, i] {
      {
        std::unique_lock<std::mutex> lock(mutex);
        go.wait(lock, [&] { return released; });
      }
      cuCtxSetCurrent(ctx);
      results[static_cast<size_t>(i)] = cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr);
    });
  }
  dl_iterate_phdr(FindShim, nullptr);
  std::printf("{\"event\":\"ready\",\"threads\":%d,\"shim_loaded\":%s}\n", threads, g_shim_end ? "true" : "false");
  std::fflush(stdout);
  g_armed.store(true);
  {
    std::lock_guard<std::mutex> lock(mutex);
    released = true;
  }
  go.notify_all();
  for (std::thread& t : workers) t.join();
  g_armed.store(false);
  std::printf("{\"event\":\"result\",\"codes\":{");
  bool first = true;
  for (size_t i = 0; i < results.size(); ++i) {
    bool seen = false;
    for (size_t j = 0; j < i; ++j) seen = seen || results[j] == results[i];
    if (seen) continue;
    int n = 0;
    for (CUresult rc : results) n += rc == results[i];
    const char* name = nullptr;
    if (cuGetErrorName(results[i], &name) != CUDA_SUCCESS || !name) name = "unknown";
    std::printf("%s\"%s\":%d", first ? "" : ",", name, n);
    first = false;
  }
  std::printf("}}\n");
  std::fflush(stdout);
  return 0;
}
