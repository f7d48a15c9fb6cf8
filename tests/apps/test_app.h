// What the shim tests' client programs have in common. gpuslice-test-direct (linked with -lcuda,
// calling the driver by name), gpuslice-test-direct-ptsz (the same, built for the per-thread
// default stream) and gpuslice-test-dlsym (dlopen + dlsym, or cuGetProcAddress) differ only in
// how they obtain the driver's entry points. Each fills a DriverTable its own way; allocating,
// holding, forking and reporting are done here, identically, so that a difference in what the
// tests see can only come from the interposition path.
//
//   <app> <api> [--chunk 256Mi] [--count N] [--threads N] [--hold S] [--refill] [--start-at MS]
//               [--churn] [--fork-child N] [--child-hold S] [--child-exit normal|kill]
//               [--child-without-cuda] [--spawn-sleeper] [--device N] [--pairs N]
//               [--teardown destroy|reset|release --after-teardown N] [--stream-device N]
//   api: alloc pitch managed async pool vmm array array3d mipmap
//
//   --pairs N: first, each thread allocates and at once frees one chunk, N times (a "pairs"
//   line reports the refusals, and how many addresses more than one thread was handed).
//   --teardown: after allocating, the context is destroyed with everything in it (cuCtxDestroy
//   of a context made with cuCtxCreate, or the primary context's reset or last release), a new
//   one made current, and --after-teardown chunks allocated in it ("after_teardown").
//   --stream-device N: async and pool allocations go on a stream of device N (and the pool is
//   created on N) while --device's context is current.
//   --pitch-width BYTES: the pitch api asks for 2 rows of BYTES (any size, to probe overflow).
//
// Output: JSON lines on stdout, written with one write(2) each (so a SIGKILL never leaves half a
// line, and a fork never duplicates buffered output). Exit codes: 0 success, allocations refused
// or not; 1 a call other than an allocation failed; 2 bad usage or no driver; 3 cuInit or the
// context failed (the allocations are still attempted, so that a shim failing closed can be
// seen refusing them).
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace gpuslice::testapp {

// The entry points the apps call, typed by their versioned cudaTypedefs.h PFNs (which cuda.h's
// renaming macros do not touch). The stream-ordered ones point at the _ptsz variants in the
// per-thread builds; the types are the same.
struct DriverTable {
  PFN_cuInit_v2000 init = nullptr;
  PFN_cuGetErrorName_v6000 get_error_name = nullptr;
  PFN_cuDeviceGet_v2000 device_get = nullptr;
  PFN_cuDevicePrimaryCtxRetain_v7000 primary_ctx_retain = nullptr;
  PFN_cuCtxSetCurrent_v4000 ctx_set_current = nullptr;
  PFN_cuMemGetInfo_v3020 mem_get_info = nullptr;
  PFN_cuDeviceTotalMem_v3020 device_total_mem = nullptr;
  PFN_cuMemAlloc_v3020 mem_alloc = nullptr;
  PFN_cuMemAllocPitch_v3020 mem_alloc_pitch = nullptr;
  PFN_cuMemAllocManaged_v6000 mem_alloc_managed = nullptr;
  PFN_cuMemFree_v3020 mem_free = nullptr;
  PFN_cuMemAllocAsync_v11020 mem_alloc_async = nullptr;
  PFN_cuMemAllocFromPoolAsync_v11020 mem_alloc_from_pool_async = nullptr;
  PFN_cuMemFreeAsync_v11020 mem_free_async = nullptr;
  PFN_cuStreamSynchronize_v2000 stream_synchronize = nullptr;
  PFN_cuMemPoolCreate_v11020 mem_pool_create = nullptr;
  PFN_cuMemPoolDestroy_v11020 mem_pool_destroy = nullptr;
  PFN_cuMemGetAllocationGranularity_v10020 mem_get_allocation_granularity = nullptr;
  PFN_cuMemCreate_v10020 mem_create = nullptr;
  PFN_cuMemRelease_v10020 mem_release = nullptr;
  PFN_cuMemAddressReserve_v10020 mem_address_reserve = nullptr;
  PFN_cuMemAddressFree_v10020 mem_address_free = nullptr;
  PFN_cuMemMap_v10020 mem_map = nullptr;
  PFN_cuMemUnmap_v10020 mem_unmap = nullptr;
  PFN_cuMemSetAccess_v10020 mem_set_access = nullptr;
  PFN_cuArrayCreate_v3020 array_create = nullptr;
  PFN_cuArray3DCreate_v3020 array3d_create = nullptr;
  PFN_cuArrayDestroy_v2000 array_destroy = nullptr;
  PFN_cuMipmappedArrayCreate_v5000 mipmapped_array_create = nullptr;
  PFN_cuMipmappedArrayDestroy_v5000 mipmapped_array_destroy = nullptr;
  PFN_cuCtxCreate_v12050 ctx_create = nullptr;
  PFN_cuCtxDestroy_v4000 ctx_destroy = nullptr;
  PFN_cuDevicePrimaryCtxRelease_v11000 primary_ctx_release = nullptr;
  PFN_cuDevicePrimaryCtxReset_v11000 primary_ctx_reset = nullptr;
  PFN_cuStreamCreate_v2000 stream_create = nullptr;
  PFN_cuStreamDestroy_v4000 stream_destroy = nullptr;
};

struct Options {
  std::string api = "alloc";
  uint64_t chunk = 256ULL << 20;
  int count = 1;  // allocations each thread asks for
  int threads = 1;
  int device = 0;
  double hold_s = 0;        // hold what was obtained (a SIGTERM ends the hold early)
  bool refill = false;      // then free one and allocate twice: room again, and only once
  int64_t start_at_ms = 0;  // CLOCK_REALTIME milliseconds: every thread starts allocating then
  bool churn = false;       // allocate and free at random until killed (at most 60 s)
  int fork_child = -1;      // fork a child that allocates this many chunks itself
  double child_hold_s = 0;
  bool child_exit_kill = false;                  // the child ends with SIGKILL instead of exit(0)
  bool child_without_cuda = false;               // the child never calls the driver (a CPU-only worker)
  bool spawn_sleeper = false;                    // posix_spawn /bin/sleep (which uses no CUDA) while holding
  int pairs = 0;                                 // alloc/free pairs per thread before the allocations
  std::string teardown;                          // "", "destroy", "reset" or "release"
  int after_teardown = 0;                        // chunks allocated in a new context after the teardown
  int stream_device = -1;                        // the device of the stream (and pool) of async/pool allocations
  uint64_t pitch_width = 0;                      // --pitch-width: the pitch api asks for rows this wide, 2 of them
  std::map<std::string, std::string> app_flags;  // the app's own flags, by name
};

// Parses argv[first..]. `app_flags` are the app's own flags; those listed in `app_switches`
// take no value. False (with a line on stderr) on bad usage.
bool ParseOptions(int argc, char** argv, int first, const std::vector<std::string>& app_flags,
                  const std::vector<std::string>& app_switches, Options* out);

// The CUresult's name as the driver spells it ("CUDA_ERROR_OUT_OF_MEMORY").
std::string ErrorName(const DriverTable& d, CUresult rc);

// One JSON object on one line. Values are added in order; strings are escaped.
class JsonLine {
 public:
  JsonLine& Add(const std::string& key, const std::string& value);
  JsonLine& Add(const std::string& key, const char* value) { return Add(key, std::string(value)); }
  JsonLine& Add(const std::string& key, uint64_t value);
  JsonLine& Add(const std::string& key, int64_t value);
  JsonLine& Add(const std::string& key, int value) { return Add(key, static_cast<int64_t>(value)); }
  JsonLine& Add(const std::string& key, bool value);
  JsonLine& AddRaw(const std::string& key, const std::string& json);
  // Appends every field of `other`.
  JsonLine& Append(const JsonLine& other);
  std::string Text() const { return "{" + body_ + "}"; }
  // Writes the line to stdout with a single write(2).
  void Print() const;

 private:
  void Key(const std::string& key);
  std::string body_;
};

std::string Quote(const std::string& text);

// Runs the allocation program described by `options` over `driver` (every field set) and
// returns the exit code. `app` names the program in its output; `extra` adds fields to the
// result line.
int RunAllocations(const DriverTable& driver, const Options& options, const std::string& app,
                   const JsonLine& extra = JsonLine());

}  // namespace gpuslice::testapp
