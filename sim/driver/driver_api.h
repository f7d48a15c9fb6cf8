// The driver API as the simulated driver defines it: every exported name and signature from cuda.h.
#pragma once
#define __CUDA_API_VERSION_INTERNAL 1
#pragma GCC visibility push(default)
#include <cuda.h>
#pragma GCC visibility pop
#include <cudaTypedefs.h>
