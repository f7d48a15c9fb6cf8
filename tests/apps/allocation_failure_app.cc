// gpuslice-test-allocation-failures: the simulated driver and NVML (linked with -lcuda and
// -lnvidia-ml, as an application is) under memory and thread exhaustion, from the injector of
// allocation_failures.h. A real driver answers exhaustion with an error code; so must the
// simulator, never with a C++ exception across its C API, which aborts a C caller.
//
//   sweep          for every N, refuse every allocation after the first N of a scenario of driver
//                  and NVML calls (contexts, events, streams, memory, copies, host functions,
//                  kernels, graphs, NVML queries); each call must answer, and once disarmed the
//                  driver must work and hold no memory the scenario did not free
//   threads        refuse a stream's worker thread: the call fails, and the stream works after
//   host-function  a host function that throws, and one whose allocation fails, on the stream's
//                  worker: the context's sticky error, CUDA_ERROR_LAUNCH_FAILED; the process lives
//   unguarded      the control: one allocation refused to this program's own C++ (no handler)
//
// Prints one summary line and exits 0, or prints what went wrong and exits 1.
#include <cuda.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/nvml_api.h"
#include "tests/apps/allocation_failures.h"

namespace {

using gpuslice::testapp::Disarm;
using gpuslice::testapp::FailAllocationsAfter;
using gpuslice::testapp::FailThreadCreation;
using gpuslice::testapp::Refused;

constexpr const char* kPtx = R"(
.version 7.0
.target sm_70
.address_size 64
.visible .entry spin_ns(.param .u64 spin_ns_param_0) { ret; }
)";

bool Fail(const std::string& why) {
  std::printf("FAILED: %s\n", why.c_str());
  return false;
}

// What a scenario made, to free once disarmed.
struct Made {
  CUcontext context = nullptr;
  CUevent event = nullptr;
  CUstream stream = nullptr;
  CUdeviceptr memory = 0;
  CUmodule module = nullptr;
  CUgraph graph = nullptr;
  CUgraphExec exec = nullptr;
  bool nvml = false;
};

void Nothing(void*) {}

// A call's result: CUresult or nvmlReturn_t.
struct Result {
  bool nvml;
  int code;
};

// The calls an application makes, in order; each result goes to `results` (the process must get
// here, whatever fails).
void Scenario(Made* m, std::vector<Result>* results) {
  auto call = [&](CUresult rc) {
    results->push_back({false, rc});
    return rc == CUDA_SUCCESS;
  };
  auto nvml = [&](nvmlReturn_t rc) {
    results->push_back({true, rc});
    return rc == NVML_SUCCESS;
  };
  CUdevice device = 0;
  call(cuDeviceGet(&device, 0));
  if (!call(cuCtxCreate(&m->context, nullptr, 0, device))) return;
  call(cuEventCreate(&m->event, 0));
  call(cuStreamCreate(&m->stream, CU_STREAM_NON_BLOCKING));
  call(cuMemAlloc(&m->memory, 1 << 20));
  static char host[4096];
  if (m->memory && m->stream) call(cuMemcpyHtoDAsync(m->memory, host, sizeof host, m->stream));
  if (m->memory) call(cuMemsetD8(m->memory, 7, 4096));
  if (m->stream) call(cuLaunchHostFunc(m->stream, Nothing, nullptr));
  CUfunction spin = nullptr;
  if (call(cuModuleLoadData(&m->module, kPtx)) && call(cuModuleGetFunction(&spin, m->module, "spin_ns"))) {
    uint64_t ns = 1000;
    void* params[] = {&ns};
    call(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, m->stream, params, nullptr));
    if (m->stream && call(cuStreamBeginCapture(m->stream, CU_STREAM_CAPTURE_MODE_GLOBAL))) {
      call(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, m->stream, params, nullptr));
      if (call(cuStreamEndCapture(m->stream, &m->graph)) && call(cuGraphInstantiate(&m->exec, m->graph, 0)))
        call(cuGraphLaunch(m->exec, m->stream));
    }
  }
  if (m->event) call(cuEventRecord(m->event, m->stream));
  if (m->stream) call(cuStreamSynchronize(m->stream));
  if (m->event) call(cuEventSynchronize(m->event));
  call(cuCtxSynchronize());
  if (!nvml(nvmlInit_v2())) return;
  m->nvml = true;
  nvmlDevice_t nvml_device = nullptr;
  if (nvml(nvmlDeviceGetHandleByIndex_v2(0, &nvml_device))) {
    char name[96];
    nvml(nvmlDeviceGetName(nvml_device, name, sizeof name));
    nvmlMemory_t memory{};
    nvml(nvmlDeviceGetMemoryInfo(nvml_device, &memory));
    unsigned int count = 8;
    nvmlProcessInfo_t processes[8];
    nvml(nvmlDeviceGetComputeRunningProcesses_v3(nvml_device, &count, processes));
    nvmlUtilization_t utilization{};
    nvml(nvmlDeviceGetUtilizationRates(nvml_device, &utilization));
  }
}

void Free(Made* m) {
  if (m->nvml) nvmlShutdown();
  if (!m->context) return;
  cuCtxSetCurrent(m->context);
  if (m->exec) cuGraphExecDestroy(m->exec);
  if (m->graph) cuGraphDestroy(m->graph);
  if (m->module) cuModuleUnload(m->module);
  if (m->memory) cuMemFree(m->memory);
  if (m->stream) cuStreamDestroy(m->stream);
  if (m->event) cuEventDestroy(m->event);
  cuCtxDestroy(m->context);
}

// Device memory in use on GPU 0, as NVML reports it.
unsigned long long MemoryUsed() {
  nvmlDevice_t device = nullptr;
  nvmlMemory_t memory{};
  if (nvmlInit_v2() != NVML_SUCCESS) return ~0ULL;
  const bool ok = nvmlDeviceGetHandleByIndex_v2(0, &device) == NVML_SUCCESS &&
                  nvmlDeviceGetMemoryInfo(device, &memory) == NVML_SUCCESS;
  nvmlShutdown();
  return ok ? memory.used : ~0ULL;
}

bool Sweep() {
  if (cuInit(0) != CUDA_SUCCESS) return Fail("cuInit");
  const unsigned long long used_before = MemoryUsed();
  int points = 0, driver_errors = 0, nvml_errors = 0;
  for (int64_t after = 0;; ++after) {
    if (after > 100000) return Fail("the scenario never ran without a refusal");
    Made made;
    std::vector<Result> results;
    results.reserve(64);  // this program's own bookkeeping allocates nothing while armed
    FailAllocationsAfter(after);
    Scenario(&made, &results);
    const int64_t refused = Refused();
    Disarm();
    Free(&made);
    if (refused == 0) {  // the whole scenario ran within `after` allocations: every point was tried
      for (size_t i = 0; i < results.size(); ++i) {
        if (results[i].code != 0) return Fail("call " + std::to_string(i) + " failed with nothing refused");
      }
      break;
    }
    ++points;
    for (const Result& r : results) {
      driver_errors += !r.nvml && r.code != CUDA_SUCCESS;
      nvml_errors += r.nvml && r.code == NVML_ERROR_MEMORY;
    }
    if (MemoryUsed() != used_before) {
      return Fail("refusing allocation " + std::to_string(after) + " left " +
                  std::to_string(MemoryUsed() - used_before) + " bytes of device memory charged");
    }
  }
  std::printf(
      "sweep: %d allocation points refused; %d driver calls answered with an error code, %d NVML calls "
      "with NVML_ERROR_MEMORY; no abort\n",
      points, driver_errors, nvml_errors);
  return true;
}

void Count(void* runs) { ++*static_cast<int*>(runs); }

bool Threads() {
  CUcontext context = nullptr;
  CUstream stream = nullptr;
  if (cuInit(0) || cuCtxCreate(&context, nullptr, 0, 0) || cuStreamCreate(&stream, 0)) return Fail("set-up");
  int refused_runs = 0, runs = 0;
  FailThreadCreation(true);
  const CUresult refused = cuLaunchHostFunc(stream, Count, &refused_runs);
  FailThreadCreation(false);
  if (refused != CUDA_ERROR_OPERATING_SYSTEM) return Fail("refused worker: " + std::to_string(refused));
  // Nothing of the refused call was queued: the stream takes work and drains, and the refused
  // function never runs.
  if (cuLaunchHostFunc(stream, Count, &runs) != CUDA_SUCCESS) return Fail("a host function after the refusal");
  if (cuStreamSynchronize(stream) != CUDA_SUCCESS) return Fail("synchronize after the refusal");
  if (runs != 1 || refused_runs != 0) return Fail("the refused host function ran");
  std::printf("threads: a refused worker thread is CUDA_ERROR_OPERATING_SYSTEM; the stream works after\n");
  return true;
}

void Throws(void*) { throw std::runtime_error("a host function's own exception"); }
void Allocates(void*) {
  FailAllocationsAfter(0);
  std::vector<char> buffer(4096);  // refused: std::bad_alloc on the stream's worker
  Disarm();
}

bool HostFunctions() {
  if (cuInit(0) != CUDA_SUCCESS) return Fail("cuInit");
  for (CUhostFn fn : {Throws, Allocates}) {
    CUcontext context = nullptr;
    CUstream stream = nullptr;
    if (cuCtxCreate(&context, nullptr, 0, 0) || cuStreamCreate(&stream, 0)) return Fail("set-up");
    if (cuLaunchHostFunc(stream, fn, nullptr) != CUDA_SUCCESS) return Fail("cuLaunchHostFunc");
    const CUresult synchronized = cuStreamSynchronize(stream);
    Disarm();
    if (synchronized != CUDA_ERROR_LAUNCH_FAILED) return Fail("synchronize: " + std::to_string(synchronized));
    CUdeviceptr p = 0;
    if (cuMemAlloc(&p, 4096) != CUDA_ERROR_LAUNCH_FAILED) return Fail("the context's error is not sticky");
    cuCtxDestroy(context);
  }
  std::printf("host-function: its failure is the context's CUDA_ERROR_LAUNCH_FAILED; the process lives\n");
  return true;
}

bool Unguarded() {
  FailAllocationsAfter(0);
  std::vector<char> buffer(4096);  // std::bad_alloc with no handler: the process aborts here
  Disarm();
  return Fail("the refused allocation did not throw");
}

}  // namespace

int main(int argc, char** argv) {
  alarm(30);  // a hang (a stream that never drains) is a failure too
  const std::string mode = argc > 1 ? argv[1] : "";
  bool ok = false;
  if (mode == "sweep") {
    ok = Sweep();
  } else if (mode == "threads") {
    ok = Threads();
  } else if (mode == "host-function") {
    ok = HostFunctions();
  } else if (mode == "unguarded") {
    ok = Unguarded();
  } else {
    std::fprintf(stderr, "usage: %s sweep|threads|host-function|unguarded\n", argv[0]);
    return 2;
  }
  return ok ? 0 : 1;
}
