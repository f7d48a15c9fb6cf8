// cuGetErrorName / cuGetErrorString, from a table generated out of cuda.h.
#include "driver_api.h"

#include <cstring>

namespace {

struct ErrorText {
  CUresult code;
  const char* name;
  const char* description;
};

constexpr ErrorText kErrors[] = {
#define GPUSLICE_ERROR(code, description) {code, #code, description},
#include "error_names.inc"
#undef GPUSLICE_ERROR
};

const ErrorText* Find(CUresult code) {
  for (const auto& e : kErrors) {
    if (e.code == code) return &e;
  }
  return nullptr;
}

}  // namespace

// Both work before cuInit and return CUDA_ERROR_INVALID_VALUE for an unknown code.
CUresult CUDAAPI cuGetErrorName(CUresult error, const char** pStr) try {
  GPUSLICE_SIM_ENTRY();
  if (!pStr) return CUDA_ERROR_INVALID_VALUE;
  const ErrorText* e = Find(error);
  *pStr = e ? e->name : nullptr;
  return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuGetErrorString(CUresult error, const char** pStr) try {
  GPUSLICE_SIM_ENTRY();
  if (!pStr) return CUDA_ERROR_INVALID_VALUE;
  const ErrorText* e = Find(error);
  *pStr = e ? e->description : nullptr;
  return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}
