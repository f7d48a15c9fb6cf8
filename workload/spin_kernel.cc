#include "workload/spin_kernel.h"

#include "workload/spin_kernel_ptx.h"

namespace gpuslice::workload {

SpinKernel::~SpinKernel() {
  if (module_ != nullptr) session_.driver().cuModuleUnload(module_);
}

bool SpinKernel::Load(KernelWidth width) {
  if (!DRIVER_CALL(session_, cuModuleLoadData, &module_, kSpinKernelPtx) ||
      !DRIVER_CALL(session_, cuModuleGetFunction, &function_, module_, kSpinKernelName))
    return false;
  blocks_ = 1;
  if (width == KernelWidth::kWide) {
    int sms = 0, per_sm = 0;
    if (!DRIVER_CALL(session_, cuDeviceGetAttribute, &sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
                     session_.device()) ||
        !DRIVER_CALL(session_, cuDeviceGetAttribute, &per_sm, CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR,
                     session_.device()))
      return false;
    blocks_ = static_cast<unsigned int>(sms > 0 ? sms : 1) * static_cast<unsigned int>(per_sm > 0 ? per_sm : 1);
  }
  return true;
}

bool SpinKernel::Launch(CUstream stream, uint64_t ns) const {
  void* params[] = {&ns};  // the driver copies the argument at launch
  return DRIVER_CALL(session_, cuLaunchKernel, function_, blocks_, 1, 1, 1, 1, 1, 0, stream, params, nullptr);
}

}  // namespace gpuslice::workload
