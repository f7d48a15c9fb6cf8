// The driver and NVML declarations the shim is compiled against. __CUDA_API_VERSION_INTERNAL
// makes cuda.h declare every versioned and _ptsz/_ptds name, so each hook is defined under its
// exact exported name and signature; only the names in libgpuslice.map are exported.
#pragma once
#define __CUDA_API_VERSION_INTERNAL 1
#pragma GCC visibility push(default)
#include <cuda.h>
#define NVML_NO_UNVERSIONED_FUNC_DEFS 1
#include "common/nvml_api.h"
#pragma GCC visibility pop
#include <cudaTypedefs.h>
