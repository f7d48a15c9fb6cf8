// vector_add_driver: a small CUDA driver-API program, the kind of client gpuslice slices.
//
// It loads a PTX kernel with cuModuleLoadData, allocates three vectors with cuMemAlloc, copies
// two of them in with cuMemcpyHtoD, launches c = a + b with cuLaunchKernel, copies c back with
// cuMemcpyDtoH and checks it against the sums computed on the host. On the way it prints what
// cuMemGetInfo reports — under libgpuslice.so that is the tenant's slice, not the whole GPU.
//
//   vector_add_driver [--elements N] [--device N] [--hold SECONDS] [--version]
//
// It links with -lcuda and calls the driver by name, nothing else. In this repository it is
// linked against the simulated driver's libcuda.so.1 but carries no run path: the dynamic loader
// finds whichever libcuda.so.1 it would find for any program, so
//   LD_LIBRARY_PATH=build/simlib build/bin/vector_add_driver   runs it on the simulated GPU, and
//   build/bin/vector_add_driver                               on the machine's real GPU.
// Outside this repository: g++ -std=c++17 -I/usr/local/cuda/include vector_add_driver.cc -lcuda
// (with vector_add_kernel.h beside it).
//
// The simulated driver does not execute GPU code (docs/simulator.md): there the kernel is
// launched and completes, c keeps the pattern it was filled with, and the program says that the
// result could not be checked. A device whose name does not end in "(simulated)" must produce
// the right sums, or the program fails.
//
// Exit status: 0 success; 1 a driver call failed or a sum was wrong; 2 bad usage; 3 an
// allocation was refused with CUDA_ERROR_OUT_OF_MEMORY (over the GPU's memory, or over the
// tenant's GPUSLICE_MEMORY_LIMIT under gpuslice).
#include <cuda.h>

#include <signal.h>
#include <time.h>

#include <cerrno>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "vector_add_kernel.h"

// Set by this repository's build to project(VERSION); a copy built elsewhere says so.
#ifndef GPUSLICE_VERSION
#define GPUSLICE_VERSION "unreleased"
#endif

namespace {

constexpr int kExitOk = 0;
constexpr int kExitFailed = 1;
constexpr int kExitUsage = 2;
constexpr int kExitOutOfMemory = 3;

constexpr uint32_t kFillPattern = 0x7fbadbadu;  // a NaN: never a sum of the inputs
constexpr unsigned kBlockSize = 256;

volatile sig_atomic_t g_stop = 0;
void OnStopSignal(int) { g_stop = 1; }

struct Options {
  uint32_t elements = 1u << 20;  // 4 MiB per vector
  int device = 0;
  double hold_s = 0;
};

const char* ErrorName(CUresult rc) {
  const char* name = nullptr;
  return cuGetErrorName(rc, &name) == CUDA_SUCCESS && name ? name : "an unknown CUresult";
}

// Reports a failed call; the exit status it deserves.
int Failed(const char* call, CUresult rc) {
  std::fprintf(stderr, "vector_add_driver: %s failed: %s (%d)\n", call, ErrorName(rc), static_cast<int>(rc));
  return rc == CUDA_ERROR_OUT_OF_MEMORY ? kExitOutOfMemory : kExitFailed;
}

std::string Bytes(uint64_t bytes) {
  char text[64];
  const double mib = static_cast<double>(bytes) / (1 << 20);
  if (mib >= 1024) std::snprintf(text, sizeof text, "%" PRIu64 " B (%.2f GiB)", bytes, mib / 1024);
  else std::snprintf(text, sizeof text, "%" PRIu64 " B (%.2f MiB)", bytes, mib);
  return text;
}

void Usage(FILE* out) {
  std::fprintf(out,
               "usage: vector_add_driver [--elements N] [--device N] [--hold SECONDS] [--version]\n"
               "  --elements N     length of each of the three float vectors (default 1048576: 4 MiB each)\n"
               "  --device N       CUDA device ordinal (default 0)\n"
               "  --hold SECONDS   keep the allocations this long before freeing them, so that\n"
               "                   `gpuslicectl status` shows them (SIGINT or SIGTERM ends it early)\n"
               "  --version        print the version and exit\n"
               "Exit status: 0 success, 1 a driver call failed or a wrong sum, 2 bad usage,\n"
               "3 an allocation refused with CUDA_ERROR_OUT_OF_MEMORY.\n");
}

bool ParseNumber(const char* text, double min, double max, double* out) {
  char* end = nullptr;
  errno = 0;
  const double value = std::strtod(text, &end);
  if (errno != 0 || end == text || *end != '\0' || !(value >= min && value <= max)) return false;
  *out = value;
  return true;
}

bool ParseArgs(int argc, char** argv, Options* options) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      Usage(stdout);
      std::exit(kExitOk);
    }
    if (arg == "--version") {
      std::printf("vector_add_driver %s\n", GPUSLICE_VERSION);
      std::exit(kExitOk);
    }
    double value = 0;
    const bool has_value = i + 1 < argc;
    if (arg == "--elements" && has_value && ParseNumber(argv[++i], 1, 1u << 30, &value) &&
        value == static_cast<uint32_t>(value)) {
      options->elements = static_cast<uint32_t>(value);
    } else if (arg == "--device" && has_value && ParseNumber(argv[++i], 0, 1023, &value) &&
               value == static_cast<int>(value)) {
      options->device = static_cast<int>(value);
    } else if (arg == "--hold" && has_value && ParseNumber(argv[++i], 0, 86400, &value)) {
      options->hold_s = value;
    } else {
      std::fprintf(stderr, "vector_add_driver: bad argument '%s'\n", argv[i]);
      Usage(stderr);
      return false;
    }
  }
  return true;
}

// Sleeps `seconds`, or until SIGINT/SIGTERM.
void Hold(double seconds) {
  struct sigaction action {};
  action.sa_handler = OnStopSignal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  const double end = static_cast<double>(now.tv_sec) + now.tv_nsec * 1e-9 + seconds;
  while (!g_stop) {
    clock_gettime(CLOCK_MONOTONIC, &now);
    const double left = end - (static_cast<double>(now.tv_sec) + now.tv_nsec * 1e-9);
    if (left <= 0) break;
    const double step = left < 0.1 ? left : 0.1;
    const timespec pause{0, static_cast<long>(step * 1e9)};
    nanosleep(&pause, nullptr);
  }
}

// Everything the program holds, released in reverse order whatever happened.
struct Session {
  CUdevice device = 0;
  CUcontext context = nullptr;
  CUmodule module = nullptr;
  CUdeviceptr a = 0, b = 0, c = 0;

  ~Session() {
    for (CUdeviceptr p : {c, b, a})
      if (p) cuMemFree(p);
    if (module) cuModuleUnload(module);
    if (context) cuDevicePrimaryCtxRelease(device);
  }
};

int Run(const Options& options) {
  CUresult rc = cuInit(0);
  if (rc != CUDA_SUCCESS) return Failed("cuInit", rc);

  Session s;
  if ((rc = cuDeviceGet(&s.device, options.device)) != CUDA_SUCCESS) return Failed("cuDeviceGet", rc);
  char name[256] = {};
  if ((rc = cuDeviceGetName(name, sizeof name, s.device)) != CUDA_SUCCESS) return Failed("cuDeviceGetName", rc);
  size_t device_total = 0;
  if ((rc = cuDeviceTotalMem(&device_total, s.device)) != CUDA_SUCCESS) return Failed("cuDeviceTotalMem", rc);
  std::printf("device %d: %s, cuDeviceTotalMem %s\n", options.device, name, Bytes(device_total).c_str());

  if ((rc = cuDevicePrimaryCtxRetain(&s.context, s.device)) != CUDA_SUCCESS)
    return Failed("cuDevicePrimaryCtxRetain", rc);
  if ((rc = cuCtxSetCurrent(s.context)) != CUDA_SUCCESS) return Failed("cuCtxSetCurrent", rc);

  size_t free_bytes = 0, total_bytes = 0;
  if ((rc = cuMemGetInfo(&free_bytes, &total_bytes)) != CUDA_SUCCESS) return Failed("cuMemGetInfo", rc);
  std::printf("cuMemGetInfo before: free %s, total %s\n", Bytes(free_bytes).c_str(), Bytes(total_bytes).c_str());

  // The inputs, and the sums the GPU must reproduce: small multiples of 1/4, so every sum is
  // exact in float and the comparison can be exact too.
  const uint32_t n = options.elements;
  const size_t bytes = size_t{n} * sizeof(float);
  std::vector<float> a(n), b(n), expected(n), c(n), check(n);
  for (uint32_t i = 0; i < n; ++i) {
    a[i] = static_cast<float>(i % 4096);
    b[i] = static_cast<float>((i * 7u) % 1000u) * 0.25f;
    expected[i] = a[i] + b[i];
  }

  std::printf("cuMemAlloc: 3 vectors of %" PRIu32 " floats, %s each\n", n, Bytes(bytes).c_str());
  std::fflush(stdout);
  if ((rc = cuMemAlloc(&s.a, bytes)) != CUDA_SUCCESS) return Failed("cuMemAlloc(a)", rc);
  if ((rc = cuMemAlloc(&s.b, bytes)) != CUDA_SUCCESS) return Failed("cuMemAlloc(b)", rc);
  if ((rc = cuMemAlloc(&s.c, bytes)) != CUDA_SUCCESS) return Failed("cuMemAlloc(c)", rc);
  if ((rc = cuMemGetInfo(&free_bytes, &total_bytes)) != CUDA_SUCCESS) return Failed("cuMemGetInfo", rc);
  std::printf("cuMemGetInfo after:  free %s, total %s\n", Bytes(free_bytes).c_str(), Bytes(total_bytes).c_str());

  // Copies: a and b go in and come back unchanged.
  if ((rc = cuMemcpyHtoD(s.a, a.data(), bytes)) != CUDA_SUCCESS) return Failed("cuMemcpyHtoD(a)", rc);
  if ((rc = cuMemcpyHtoD(s.b, b.data(), bytes)) != CUDA_SUCCESS) return Failed("cuMemcpyHtoD(b)", rc);
  if ((rc = cuMemsetD32(s.c, kFillPattern, n)) != CUDA_SUCCESS) return Failed("cuMemsetD32(c)", rc);
  if ((rc = cuMemcpyDtoH(check.data(), s.a, bytes)) != CUDA_SUCCESS) return Failed("cuMemcpyDtoH(a)", rc);
  const bool a_intact = std::memcmp(check.data(), a.data(), bytes) == 0;
  if ((rc = cuMemcpyDtoH(check.data(), s.b, bytes)) != CUDA_SUCCESS) return Failed("cuMemcpyDtoH(b)", rc);
  const bool b_intact = std::memcmp(check.data(), b.data(), bytes) == 0;
  if (!a_intact || !b_intact) {
    std::fprintf(stderr, "vector_add_driver: copies: %s came back from the device changed\n", a_intact ? "b" : "a");
    return kExitFailed;
  }
  std::printf("copies: a and b round-tripped host -> device -> host intact (%s)\n", Bytes(2 * bytes).c_str());

  // The kernel.
  if ((rc = cuModuleLoadData(&s.module, gpuslice::examples::kVectorAddPtx)) != CUDA_SUCCESS)
    return Failed("cuModuleLoadData", rc);
  CUfunction function = nullptr;
  if ((rc = cuModuleGetFunction(&function, s.module, gpuslice::examples::kVectorAddName)) != CUDA_SUCCESS)
    return Failed("cuModuleGetFunction", rc);
  const unsigned blocks = (n + kBlockSize - 1) / kBlockSize;
  uint32_t count = n;
  void* params[] = {&s.c, &s.a, &s.b, &count};
  if ((rc = cuLaunchKernel(function, blocks, 1, 1, kBlockSize, 1, 1, 0, nullptr, params, nullptr)) != CUDA_SUCCESS)
    return Failed("cuLaunchKernel", rc);
  if ((rc = cuCtxSynchronize()) != CUDA_SUCCESS) return Failed("cuCtxSynchronize", rc);
  std::printf("launch: %s<<<%u, %u>>> over %" PRIu32 " elements completed\n", gpuslice::examples::kVectorAddName,
              blocks, kBlockSize, n);
  if ((rc = cuMemcpyDtoH(c.data(), s.c, bytes)) != CUDA_SUCCESS) return Failed("cuMemcpyDtoH(c)", rc);

  // The result, against the host's sums.
  uint32_t wrong = 0, untouched = 0, first_wrong = 0;
  for (uint32_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, &c[i], sizeof bits);
    if (bits == kFillPattern) ++untouched;
    if (std::memcmp(&c[i], &expected[i], sizeof(float)) != 0 && wrong++ == 0) first_wrong = i;
  }
  const std::string device_name = name;
  const std::string simulated_suffix = "(simulated)";
  const bool simulated =
      device_name.size() >= simulated_suffix.size() &&
      device_name.compare(device_name.size() - simulated_suffix.size(), std::string::npos, simulated_suffix) == 0;
  if (wrong == 0) {
    std::printf("result: all %" PRIu32 " sums equal a + b computed on the host\n", n);
  } else if (simulated && untouched == n) {
    std::printf(
        "result: not checked: the simulated GPU does not execute kernels (docs/simulator.md), so c still "
        "holds its fill pattern\n");
  } else {
    std::fprintf(stderr,
                 "vector_add_driver: result: %" PRIu32 " of %" PRIu32 " sums wrong; first at %" PRIu32
                 ": got %g, expected %g\n",
                 wrong, n, first_wrong, static_cast<double>(c[first_wrong]),
                 static_cast<double>(expected[first_wrong]));
    return kExitFailed;
  }

  if (options.hold_s > 0) {
    std::printf("holding %s for %g s (SIGINT or SIGTERM ends it early)\n", Bytes(3 * bytes).c_str(), options.hold_s);
    std::fflush(stdout);
    Hold(options.hold_s);
  }
  std::printf("done\n");
  return kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  if (!ParseArgs(argc, argv, &options)) return kExitUsage;
  const int status = Run(options);
  std::fflush(stdout);
  return status;
}
