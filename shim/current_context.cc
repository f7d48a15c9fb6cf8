#include "shim/current_context.h"

namespace gpuslice::shim {

CUcontext CurrentContext::Ask(const RealDriver* real) {
  CUcontext context = nullptr;
  if (!real || real->cuCtxGetCurrent(&context) != CUDA_SUCCESS) return nullptr;  // asked again next time
  Set(context);
  return context;
}

}  // namespace gpuslice::shim
