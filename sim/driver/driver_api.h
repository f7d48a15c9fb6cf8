// The driver API as the simulated driver defines it: every exported name and signature from cuda.h.
#pragma once
#define __CUDA_API_VERSION_INTERNAL 1
#pragma GCC visibility push(default)
#include <cuda.h>
#pragma GCC visibility pop
#include <cudaTypedefs.h>

#include "sim/call_model.h"  // GPUSLICE_SIM_ENTRY, the first statement of every entry point
