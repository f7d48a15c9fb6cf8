// The device-memory estimate for CUDA arrays, shared by the simulated driver (which charges it)
// and the shim (which counts it against quotas). The formula is documented in array_bytes.cc.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <optional>

namespace gpuslice {

// Bytes of an array with this descriptor, before rounding; nullopt for a descriptor the driver
// rejects (CUDA_ERROR_INVALID_VALUE).
std::optional<uint64_t> ArrayBytes(const CUDA_ARRAY3D_DESCRIPTOR& desc);
// The sum of ArrayBytes over `levels` mipmap levels; nullopt for an invalid level count.
std::optional<uint64_t> MipmappedArrayBytes(const CUDA_ARRAY3D_DESCRIPTOR& desc, unsigned int levels);
// The descriptor of mipmap level `level` of `base`.
CUDA_ARRAY3D_DESCRIPTOR LevelDescriptor(const CUDA_ARRAY3D_DESCRIPTOR& base, unsigned int level);
// 1 + floor(log2(largest extent)).
unsigned int MaxMipmapLevels(const CUDA_ARRAY3D_DESCRIPTOR& desc);

}  // namespace gpuslice
