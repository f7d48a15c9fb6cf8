#include "workload/spin_kernel.h"

#include "workload/spin_kernel_ptx.h"

namespace gpuslice::workload {

SpinKernel::~SpinKernel() {
  if (module_ != nullptr) session_.driver().cuModuleUnload(module_);
}

bool SpinKernel::Load() {
  return DRIVER_CALL(session_, cuModuleLoadData, &module_, kSpinKernelPtx) &&
         DRIVER_CALL(session_, cuModuleGetFunction, &function_, module_, kSpinKernelName);
}

bool SpinKernel::Launch(CUstream stream, uint64_t ns) const {
  void* params[] = {&ns};  // the driver copies the argument at launch
  return DRIVER_CALL(session_, cuLaunchKernel, function_, 1, 1, 1, 1, 1, 1, 0, stream, params, nullptr);
}

}  // namespace gpuslice::workload
