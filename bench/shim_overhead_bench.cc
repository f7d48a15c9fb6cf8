// What the shim adds to each intercepted call, measured against the simulated driver called
// directly, in the same run (Google Benchmark).
//
// The benchmark links the shim's hook sources into the executable, so `cuMemAlloc_v2(...)` is
// gpuslice's hook and `Real()->cuMemAlloc_v2(...)` the simulated driver's function the hook
// forwards to — the same code the preloaded library runs, minus one PLT jump. Each pair of
// benchmarks differs only in that; docs/performance.md records the figures.
//
// The driver is whatever libcuda.so.1 the loader finds: the simulated one by default (the
// build sets the RUNPATH), or bench/null_driver.cc with LD_LIBRARY_PATH=<build>/nulldriver,
// which isolates the shim's own cost from the driver's.
//
// The launch hook goes through the tenant's compute gate. By default the GPU's sharing mode is
// timeslice and the benchmark's tenant, alone, holds the grant: BM_LaunchKernel_Shim measures
// the gated fast path. `--gpuslice-mode=none` (before Google Benchmark's own flags) sets the
// GPU's mode to none first (as `gpuslicectl set --mode none` would), so the same benchmark
// measures pure pass-through.
#include "shim/driver_api.h"  // first: declares every versioned name

#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

#include "broker/broker.h"
#include "broker/scheduler.h"
#include "shim/real_driver.h"

namespace {

using gpuslice::shim::Real;

constexpr const char* kPtx = R"(
.version 7.0
.target sm_70
.address_size 64
.visible .entry noop() { ret; }
)";

CUfunction g_noop = nullptr;
CUstream g_stream = nullptr;
CUcontext g_context = nullptr;
decltype(&cuCtxSetCurrent) g_set_current = nullptr;

// Benchmark threads start with no current context: each makes the benchmark's current, as an
// application's worker threads do.
void MakeContextCurrent() { g_set_current(g_context); }

// A private simulated GPU and broker segment, a context, and a no-op kernel. With
// `mode_none`, the GPU's sharing mode is set to none before the benchmarks run; with `tracked`,
// the tenant is of the background class, whose launches are tracked by completion even alone
// (each followed by an event), as every tenant's are while another shares the GPU.
void Setup(bool mode_none, bool tracked) {
  const std::string tag = std::to_string(getpid());
  setenv("GPUSLICE_SIM_STATE", ("/dev/shm/gpuslice-bench-" + tag).c_str(), 1);
  setenv("GPUSLICE_STATE_DIR", ("/tmp/gpuslice-bench-" + tag).c_str(), 1);
  setenv("GPUSLICE_MEMORY_LIMIT", "64Gi", 1);
  if (tracked) setenv("GPUSLICE_COMPUTE_CLASS", "background", 1);
  CUcontext& ctx = g_context;
  CUmodule module = nullptr;
  if (cuInit(0) != CUDA_SUCCESS || Real()->cuDeviceGetUuid_v2 == nullptr) {
    std::fprintf(stderr, "shim_overhead_bench: cannot initialise the simulated driver through the shim\n");
    std::exit(1);
  }
  auto* retain = reinterpret_cast<decltype(&cuDevicePrimaryCtxRetain)>(
      gpuslice::shim::RealDlsym(Real()->handle, "cuDevicePrimaryCtxRetain"));
  auto* set_current =
      reinterpret_cast<decltype(&cuCtxSetCurrent)>(gpuslice::shim::RealDlsym(Real()->handle, "cuCtxSetCurrent"));
  auto* load =
      reinterpret_cast<decltype(&cuModuleLoadData)>(gpuslice::shim::RealDlsym(Real()->handle, "cuModuleLoadData"));
  auto* get_function = reinterpret_cast<decltype(&cuModuleGetFunction)>(
      gpuslice::shim::RealDlsym(Real()->handle, "cuModuleGetFunction"));
  auto* create_stream =
      reinterpret_cast<decltype(&cuStreamCreate)>(gpuslice::shim::RealDlsym(Real()->handle, "cuStreamCreate"));
  retain(&ctx, 0);
  g_set_current = set_current;
  set_current(ctx);
  load(&module, kPtx);
  get_function(&g_noop, module, "noop");
  create_stream(&g_stream, CU_STREAM_NON_BLOCKING);
  // One launch through the hook: the tenant's ledger and compute gate exist from here on, and
  // the tenant, alone, holds the GPU's grant.
  if (cuLaunchKernel(g_noop, 1, 1, 1, 1, 1, 1, 0, g_stream, nullptr, nullptr) != CUDA_SUCCESS) {
    std::fprintf(stderr, "shim_overhead_bench: the first launch through the shim failed\n");
    std::exit(1);
  }
  if (mode_none) {
    CUuuid uuid{};
    Real()->cuDeviceGetUuid_v2(&uuid, 0);
    uint8_t bytes[16];
    std::memcpy(bytes, uuid.bytes, sizeof bytes);
    auto attached = gpuslice::broker::Broker::Attach(getenv("GPUSLICE_STATE_DIR"));
    gpuslice::Status set = attached.status();
    if (set.ok())
      set = gpuslice::broker::SetGpuPolicy((*attached)->segment(), bytes, gpuslice::broker::SharingMode::kNone, 0);
    const std::string error = set.message();
    if (!set.ok()) {
      std::fprintf(stderr, "shim_overhead_bench: cannot set the sharing mode to none: %s\n", error.c_str());
      std::exit(1);
    }
  }
  benchmark::AddCustomContext("gpuslice_mode", mode_none ? "none (launches pass through)"
                                               : tracked ? "timeslice, every launch tracked (background class)"
                                                         : "timeslice (the tenant holds the grant: gated fast path)");
}

void Drain() {
  auto* sync = reinterpret_cast<decltype(&cuStreamSynchronize)>(
      gpuslice::shim::RealDlsym(Real()->handle, "cuStreamSynchronize"));
  sync(g_stream);
}

void BM_LaunchKernel_Direct(benchmark::State& state) {
  MakeContextCurrent();
  for (auto _ : state) {
    Real()->cuLaunchKernel(g_noop, 1, 1, 1, 1, 1, 1, 0, g_stream, nullptr, nullptr);
  }
  if (state.thread_index() == 0) Drain();
}
void BM_LaunchKernel_Shim(benchmark::State& state) {
  MakeContextCurrent();
  for (auto _ : state) {
    cuLaunchKernel(g_noop, 1, 1, 1, 1, 1, 1, 0, g_stream, nullptr, nullptr);
  }
  if (state.thread_index() == 0) Drain();
}

void BM_MemAllocFree_Direct(benchmark::State& state) {
  MakeContextCurrent();
  CUdeviceptr p = 0;
  for (auto _ : state) {
    Real()->cuMemAlloc_v2(&p, 1 << 20);
    Real()->cuMemFree_v2(p);
  }
}
void BM_MemAllocFree_Shim(benchmark::State& state) {
  MakeContextCurrent();
  CUdeviceptr p = 0;
  for (auto _ : state) {
    cuMemAlloc_v2(&p, 1 << 20);
    cuMemFree_v2(p);
  }
}

void BM_MemGetInfo_Direct(benchmark::State& state) {
  size_t free = 0, total = 0;
  for (auto _ : state) benchmark::DoNotOptimize(Real()->cuMemGetInfo_v2(&free, &total));
}
void BM_MemGetInfo_Shim(benchmark::State& state) {
  size_t free = 0, total = 0;
  for (auto _ : state) benchmark::DoNotOptimize(cuMemGetInfo_v2(&free, &total));
}

// Interleaved pairs so that drift of a noisy machine hits both sides alike. Launches also from
// 2, 4 and 8 threads at once: the shim's cost per launch must not grow with them (threads of one
// process share its tracker, and must not share a written cache line per launch). Thread counts
// above the machine's cores measure time-sharing too, on both sides of a pair alike.
BENCHMARK(BM_LaunchKernel_Direct)->Repetitions(5)->ReportAggregatesOnly(true);
BENCHMARK(BM_LaunchKernel_Shim)->Repetitions(5)->ReportAggregatesOnly(true);
BENCHMARK(BM_LaunchKernel_Direct)->ThreadRange(2, 8)->UseRealTime()->Repetitions(5)->ReportAggregatesOnly(true);
BENCHMARK(BM_LaunchKernel_Shim)->ThreadRange(2, 8)->UseRealTime()->Repetitions(5)->ReportAggregatesOnly(true);
BENCHMARK(BM_MemAllocFree_Direct)->Repetitions(5)->ReportAggregatesOnly(true);
BENCHMARK(BM_MemAllocFree_Shim)->Repetitions(5)->ReportAggregatesOnly(true);
BENCHMARK(BM_MemGetInfo_Direct)->Repetitions(5)->ReportAggregatesOnly(true);
BENCHMARK(BM_MemGetInfo_Shim)->Repetitions(5)->ReportAggregatesOnly(true);

}  // namespace

int main(int argc, char** argv) {
  bool mode_none = false;
  bool tracked = false;
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--gpuslice-mode=none") == 0) {
      mode_none = true;
    } else if (std::strcmp(argv[i], "--gpuslice-tracked") == 0) {
      tracked = true;
    } else if (std::strcmp(argv[i], "--gpuslice-mode=timeslice") != 0) {
      argv[kept++] = argv[i];
    }
  }
  argc = kept;
  Setup(mode_none, tracked);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  unlink(getenv("GPUSLICE_SIM_STATE"));
  std::error_code ignored;
  std::filesystem::remove_all(getenv("GPUSLICE_STATE_DIR"), ignored);
  return 0;
}
