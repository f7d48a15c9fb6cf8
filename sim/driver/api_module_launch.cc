// Modules, functions and kernel launches.
//
// Modules are PTX text; their `.entry` names are the functions. A function named spin_ns
// occupies the device for its first (uint64) argument in nanoseconds per wave of its grid
// (sim/work_model.h), exactly what the workload's PTX kernel does on a real GPU by spinning on
// %globaltimer. A function named fault_illegal_address faults when it runs, as a kernel that
// stores through a null pointer does (CUDA_ERROR_ILLEGAL_ADDRESS, see Driver::Fault). Any other
// function takes GPUSLICE_SIM_KERNEL_NS (default 0) whatever its grid.
#include "driver_api.h"

#include <cstring>
#include <fstream>
#include <regex>
#include <sstream>

#include "driver_state.h"

namespace gpuslice::sim {
namespace {

std::vector<std::string> PtxEntries(const char* ptx) {
  static const std::regex kEntry(R"(\.entry\s+([A-Za-z_$][A-Za-z0-9_$]*))");
  std::vector<std::string> names;
  const std::string text(ptx);
  for (auto it = std::sregex_iterator(text.begin(), text.end(), kEntry); it != std::sregex_iterator(); ++it)
    names.push_back((*it)[1]);
  return names;
}

CUresult LoadPtx(CUmodule* module, const void* image) {
  Driver* d = nullptr;
  CUctx_st* ctx = nullptr;
  if (CUresult rc = RequireContext(&d, &ctx); rc != CUDA_SUCCESS) return rc;
  if (!module || !image) return CUDA_ERROR_INVALID_VALUE;
  const char* text = static_cast<const char*>(image);
  if (std::strncmp(text,
                   "\x7f"
                   "ELF",
                   4) == 0)
    return CUDA_ERROR_NOT_SUPPORTED;  // cubins: not simulated
  if (!std::strstr(text, ".version") || !std::strstr(text, ".target")) return CUDA_ERROR_INVALID_PTX;
  auto* mod = new CUmod_st();
  mod->context = ctx;
  mod->entries = PtxEntries(text);
  d->Register(mod);
  *module = mod;
  return CUDA_SUCCESS;
}

uint64_t KernelDuration(Driver* d, CUfunction f, void** kernelParams, void** extra) {
  if (!f->is_spin) return d->default_kernel_ns();
  uint64_t ns = 0;
  if (kernelParams && kernelParams[0]) {
    std::memcpy(&ns, kernelParams[0], sizeof ns);
  } else if (extra) {
    for (void** e = extra; *e != CU_LAUNCH_PARAM_END; e += 2) {
      if (e[0] == CU_LAUNCH_PARAM_BUFFER_POINTER && e[1]) std::memcpy(&ns, e[1], sizeof ns);
    }
  }
  return ns;
}

}  // namespace

// The operation a launch of `f` in `ctx` enqueues (or a captured launch adds to its graph).
CUresult KernelOp(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                  void** kernelParams, void** extra, CUctx_st* ctx, StreamOp* op) {
  Driver* d = Driver::Get();
  if (!f || !d->IsRegistered(f)) return CUDA_ERROR_INVALID_HANDLE;
  if (gx == 0 || gy == 0 || gz == 0 || bx == 0 || by == 0 || bz == 0) return CUDA_ERROR_INVALID_VALUE;
  if (static_cast<uint64_t>(bx) * by * bz > 1024) return CUDA_ERROR_INVALID_VALUE;
  if (kernelParams && extra) return CUDA_ERROR_INVALID_VALUE;
  if (f->is_spin && !kernelParams && !extra) return CUDA_ERROR_INVALID_VALUE;
  if (f->module->context != ctx) return CUDA_ERROR_INVALID_HANDLE;
  if (f->is_fault) {  // its fault reaches the context when the stream gets to it
    op->kind = StreamOp::Kind::kHostWork;
    op->work = [d, ctx] { d->Fault(ctx); };
    return CUDA_SUCCESS;
  }
  op->kind = StreamOp::Kind::kKernel;
  op->kernel_ns = KernelDuration(d, f, kernelParams, extra);
  if (f->is_spin) {  // the work model applies to spin_ns, whose length per wave is known
    op->blocks = static_cast<uint64_t>(gx) * gy * gz;
    op->threads_per_block = bx * by * bz;
  }
  return CUDA_SUCCESS;
}

// In api_graph.cc: a launch into a stream being captured goes into its graph.
bool CaptureLaunch(CUstream_st* s, StreamOp&& op);

namespace {

CUresult Launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                CUstream hStream, void** kernelParams, void** extra, bool per_thread) {
  Driver* d = nullptr;
  CUctx_st* ctx = nullptr;
  if (CUresult rc = RequireContext(&d, &ctx); rc != CUDA_SUCCESS) return rc;
  CUstream_st* s = nullptr;
  if (CUresult rc = ResolveStream(hStream, per_thread, &s); rc != CUDA_SUCCESS) return rc;
  StreamOp op;
  if (CUresult rc = KernelOp(f, gx, gy, gz, bx, by, bz, kernelParams, extra, s->context, &op); rc != CUDA_SUCCESS)
    return rc;
  if (!CaptureLaunch(s, std::move(op))) s->executor->Enqueue(std::move(op));
  return CUDA_SUCCESS;
}

CUresult LaunchEx(const CUlaunchConfig* config, CUfunction f, void** kernelParams, void** extra, bool per_thread) {
  if (!config) return CUDA_ERROR_INVALID_VALUE;
  return Launch(f, config->gridDimX, config->gridDimY, config->gridDimZ, config->blockDimX, config->blockDimY,
                config->blockDimZ, config->hStream, kernelParams, extra, per_thread);
}

}  // namespace
}  // namespace gpuslice::sim

using namespace gpuslice::sim;

CUresult CUDAAPI cuModuleLoadData(CUmodule* module, const void* image) try {
  GPUSLICE_SIM_ENTRY();
  return LoadPtx(module, image);
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuModuleLoadDataEx(CUmodule* module, const void* image, unsigned int numOptions, CUjit_option* options,
                                    void** optionValues) try {
  GPUSLICE_SIM_ENTRY();
  return LoadPtx(module, image);
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuModuleLoad(CUmodule* module, const char* fname) try {
  GPUSLICE_SIM_ENTRY();
  if (!fname) return CUDA_ERROR_INVALID_VALUE;
  std::ifstream in(fname);
  if (!in) return CUDA_ERROR_FILE_NOT_FOUND;
  std::stringstream text;
  text << in.rdbuf();
  return LoadPtx(module, text.str().c_str());
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuModuleUnload(CUmodule hmod) try {
  GPUSLICE_SIM_ENTRY();
  Driver* d = nullptr;
  if (CUresult rc = RequireInit(&d); rc != CUDA_SUCCESS) return rc;
  if (!hmod || !d->IsRegistered(hmod)) return CUDA_ERROR_INVALID_HANDLE;
  // Functions stay allocated (launches may be queued) but stop being valid handles.
  for (CUfunc_st* f : hmod->functions) d->Unregister(f);
  d->Unregister(hmod);
  return CUDA_SUCCESS;
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuModuleGetFunction(CUfunction* hfunc, CUmodule hmod, const char* name) try {
  GPUSLICE_SIM_ENTRY();
  Driver* d = nullptr;
  if (CUresult rc = RequireInit(&d); rc != CUDA_SUCCESS) return rc;
  if (!hfunc || !name) return CUDA_ERROR_INVALID_VALUE;
  if (!hmod || !d->IsRegistered(hmod)) return CUDA_ERROR_INVALID_HANDLE;
  bool found = false;
  for (const auto& entry : hmod->entries) found = found || entry == name;
  if (!found) return CUDA_ERROR_NOT_FOUND;
  auto* f = new CUfunc_st();
  f->module = hmod;
  f->name = name;
  f->is_spin = f->name == "spin_ns";
  f->is_fault = f->name == "fault_illegal_address";
  hmod->functions.push_back(f);
  d->Register(f);
  *hfunc = f;
  return CUDA_SUCCESS;
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuFuncGetName(const char** name, CUfunction hfunc) try {
  GPUSLICE_SIM_ENTRY();
  Driver* d = nullptr;
  if (CUresult rc = RequireInit(&d); rc != CUDA_SUCCESS) return rc;
  if (!name) return CUDA_ERROR_INVALID_VALUE;
  if (!hfunc || !d->IsRegistered(hfunc)) return CUDA_ERROR_INVALID_HANDLE;
  *name = hfunc->name.c_str();
  return CUDA_SUCCESS;
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuFuncGetAttribute(int* pi, CUfunction_attribute attrib, CUfunction hfunc) try {
  GPUSLICE_SIM_ENTRY();
  Driver* d = nullptr;
  if (CUresult rc = RequireInit(&d); rc != CUDA_SUCCESS) return rc;
  if (!pi || attrib < 0 || attrib >= CU_FUNC_ATTRIBUTE_MAX) return CUDA_ERROR_INVALID_VALUE;
  if (!hfunc || !d->IsRegistered(hfunc)) return CUDA_ERROR_INVALID_HANDLE;
  *pi = attrib == CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK ? 1024 : 0;
  return CUDA_SUCCESS;
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,
                                unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,
                                unsigned int sharedMemBytes, CUstream hStream, void** kernelParams, void** extra) try {
  GPUSLICE_SIM_ENTRY();
  return Launch(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, hStream, kernelParams, extra, false);
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,
                                     unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,
                                     unsigned int sharedMemBytes, CUstream hStream, void** kernelParams,
                                     void** extra) try {
  GPUSLICE_SIM_ENTRY();
  return Launch(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, hStream, kernelParams, extra, true);
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction f, void** kernelParams, void** extra) try {
  GPUSLICE_SIM_ENTRY();
  return LaunchEx(config, f, kernelParams, extra, false);
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuLaunchKernelEx_ptsz(const CUlaunchConfig* config, CUfunction f, void** kernelParams,
                                       void** extra) try {
  GPUSLICE_SIM_ENTRY();
  return LaunchEx(config, f, kernelParams, extra, true);
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuLaunchCooperativeKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                           unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                                           unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
                                           void** kernelParams) try {
  GPUSLICE_SIM_ENTRY();
  return Launch(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, hStream, kernelParams, nullptr,
                false);
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                                unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                                                unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
                                                void** kernelParams) try {
  GPUSLICE_SIM_ENTRY();
  return Launch(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, hStream, kernelParams, nullptr, true);
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}
