// How many device bytes a CUDA array takes. Arrays never state their size, so the simulated
// driver charges and gpuslice counts them with this one estimate.
#include "common/array_bytes.h"

#include <algorithm>

namespace gpuslice {
namespace {

constexpr unsigned int kKnownArrayFlags = CUDA_ARRAY3D_LAYERED | CUDA_ARRAY3D_SURFACE_LDST | CUDA_ARRAY3D_CUBEMAP |
                                          CUDA_ARRAY3D_TEXTURE_GATHER | CUDA_ARRAY3D_DEPTH_TEXTURE |
                                          CUDA_ARRAY3D_COLOR_ATTACHMENT | CUDA_ARRAY3D_SPARSE |
                                          CUDA_ARRAY3D_DEFERRED_MAPPING | CUDA_ARRAY3D_VIDEO_ENCODE_DECODE;

// How a format lays out one element: either `component_bytes` per channel (the classic formats,
// whose channel count comes from NumChannels), or a fixed size for the whole element given as
// `bits` per texel (packed, YUV) or `block_bytes` per 4x4 block (BC compression).
struct FormatLayout {
  uint32_t component_bytes = 0;
  uint32_t bits = 0;
  uint32_t block_bytes = 0;
};

std::optional<FormatLayout> LayoutOf(CUarray_format format) {
  switch (format) {
    case CU_AD_FORMAT_UNSIGNED_INT8:
    case CU_AD_FORMAT_SIGNED_INT8: return FormatLayout{1, 0, 0};
    case CU_AD_FORMAT_UNSIGNED_INT16:
    case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF: return FormatLayout{2, 0, 0};
    case CU_AD_FORMAT_UNSIGNED_INT32:
    case CU_AD_FORMAT_SIGNED_INT32:
    case CU_AD_FORMAT_FLOAT: return FormatLayout{4, 0, 0};
    case CU_AD_FORMAT_UNORM_INT8X1:
    case CU_AD_FORMAT_SNORM_INT8X1: return FormatLayout{0, 8, 0};
    case CU_AD_FORMAT_UNORM_INT8X2:
    case CU_AD_FORMAT_SNORM_INT8X2:
    case CU_AD_FORMAT_UNORM_INT16X1:
    case CU_AD_FORMAT_SNORM_INT16X1: return FormatLayout{0, 16, 0};
    case CU_AD_FORMAT_UNORM_INT8X4:
    case CU_AD_FORMAT_SNORM_INT8X4:
    case CU_AD_FORMAT_UNORM_INT16X2:
    case CU_AD_FORMAT_SNORM_INT16X2:
    case CU_AD_FORMAT_UNORM_INT_101010_2: return FormatLayout{0, 32, 0};
    case CU_AD_FORMAT_UNORM_INT16X4:
    case CU_AD_FORMAT_SNORM_INT16X4: return FormatLayout{0, 64, 0};
    case CU_AD_FORMAT_BC1_UNORM:
    case CU_AD_FORMAT_BC1_UNORM_SRGB:
    case CU_AD_FORMAT_BC4_UNORM:
    case CU_AD_FORMAT_BC4_SNORM: return FormatLayout{0, 0, 8};
    case CU_AD_FORMAT_BC2_UNORM:
    case CU_AD_FORMAT_BC2_UNORM_SRGB:
    case CU_AD_FORMAT_BC3_UNORM:
    case CU_AD_FORMAT_BC3_UNORM_SRGB:
    case CU_AD_FORMAT_BC5_UNORM:
    case CU_AD_FORMAT_BC5_SNORM:
    case CU_AD_FORMAT_BC6H_UF16:
    case CU_AD_FORMAT_BC6H_SF16:
    case CU_AD_FORMAT_BC7_UNORM:
    case CU_AD_FORMAT_BC7_UNORM_SRGB: return FormatLayout{0, 0, 16};
    case CU_AD_FORMAT_NV12:  // 4:2:0, 8-bit: luma plus half-size chroma
      return FormatLayout{0, 12, 0};
    case CU_AD_FORMAT_P010:
    case CU_AD_FORMAT_P016: return FormatLayout{0, 24, 0};
    case CU_AD_FORMAT_NV16:
    case CU_AD_FORMAT_YUY2: return FormatLayout{0, 16, 0};
    case CU_AD_FORMAT_P210:
    case CU_AD_FORMAT_P216:
    case CU_AD_FORMAT_Y210:
    case CU_AD_FORMAT_Y216:
    case CU_AD_FORMAT_AYUV:
    case CU_AD_FORMAT_Y410: return FormatLayout{0, 32, 0};
    case CU_AD_FORMAT_Y416: return FormatLayout{0, 64, 0};
    case CU_AD_FORMAT_Y444_PLANAR8:
    case CU_AD_FORMAT_YUV444_8bit_SemiPlanar: return FormatLayout{0, 24, 0};
    case CU_AD_FORMAT_Y444_PLANAR10:
    case CU_AD_FORMAT_YUV444_16bit_SemiPlanar: return FormatLayout{0, 48, 0};
    default: return std::nullopt;
  }
}

// a * b, or nullopt on overflow.
std::optional<uint64_t> Mul(uint64_t a, uint64_t b) {
  uint64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

}  // namespace

// The device bytes a CUDA array takes (before ChargedBytes rounding); nullopt for a descriptor
// the driver rejects (CUDA_ERROR_INVALID_VALUE). This is THE estimate: gpuslice counts arrays
// against quotas with the same formula.
//
//   bytes = Width × max(Height, 1) × max(Depth, 1) × element size
//   element size = component size of Format × NumChannels, NumChannels ∈ {1, 2, 4};
//     component size: 1 for (UN)SIGNED_INT8, 2 for (UN)SIGNED_INT16 and HALF,
//     4 for (UN)SIGNED_INT32 and FLOAT.
//   Formats that fix the element layout themselves (UNORM/SNORM_INTnXk, UNORM_INT_101010_2, YUV
//   formats) use their bits per texel instead (NV12 12, P010/P016 24, ...; rounded up to whole
//   bytes per slice); block-compressed formats (BC1..BC7) take 8 or 16 bytes per 4×4 block.
//   For those NumChannels only has to be 1 to 4.
//   Depth counts layers for layered arrays and faces (6 per cubemap) for cubemaps.
//   Sparse and deferred-mapping arrays (CUDA_ARRAY3D_SPARSE / _DEFERRED_MAPPING) get their
//   memory from cuMemMapArrayAsync: they take 0 bytes at creation.
std::optional<uint64_t> ArrayBytes(const CUDA_ARRAY3D_DESCRIPTOR& desc) {
  if (desc.Width == 0) return std::nullopt;
  if (desc.Flags & ~kKnownArrayFlags) return std::nullopt;
  const bool layered = desc.Flags & CUDA_ARRAY3D_LAYERED;
  const bool cubemap = desc.Flags & CUDA_ARRAY3D_CUBEMAP;
  // A 1D array has no depth unless it is layered (Depth = layers).
  if (desc.Height == 0 && desc.Depth != 0 && !layered) return std::nullopt;
  if (cubemap && (desc.Width != desc.Height || desc.Depth == 0 || desc.Depth % 6 != 0 || (!layered && desc.Depth != 6)))
    return std::nullopt;
  const auto layout = LayoutOf(desc.Format);
  if (!layout) return std::nullopt;
  if (layout->component_bytes) {
    if (desc.NumChannels != 1 && desc.NumChannels != 2 && desc.NumChannels != 4) return std::nullopt;
  } else if (desc.NumChannels < 1 || desc.NumChannels > 4) {
    return std::nullopt;
  }
  const uint64_t width = desc.Width;
  const uint64_t height = std::max<uint64_t>(desc.Height, 1);
  const uint64_t depth = std::max<uint64_t>(desc.Depth, 1);

  std::optional<uint64_t> slice;  // bytes of one 2D slice
  if (layout->component_bytes) {
    auto texels = Mul(width, height);
    slice = texels ? Mul(*texels, uint64_t{layout->component_bytes} * desc.NumChannels) : std::nullopt;
  } else if (layout->bits) {
    auto texels = Mul(width, height);
    auto bits = texels ? Mul(*texels, layout->bits) : std::nullopt;
    if (bits) slice = (*bits + 7) / 8;
  } else {
    auto blocks = Mul((width + 3) / 4, (height + 3) / 4);
    slice = blocks ? Mul(*blocks, layout->block_bytes) : std::nullopt;
  }
  if (!slice) return std::nullopt;
  const auto bytes = Mul(*slice, depth);
  if (!bytes) return std::nullopt;
  if (desc.Flags & (CUDA_ARRAY3D_SPARSE | CUDA_ARRAY3D_DEFERRED_MAPPING)) return 0;
  return bytes;
}

// The descriptor of mipmap level `level`: every extent halves (never below 1; an extent of 0
// stays 0), except Depth of layered arrays and cubemaps, which counts layers / faces.
CUDA_ARRAY3D_DESCRIPTOR LevelDescriptor(const CUDA_ARRAY3D_DESCRIPTOR& base, unsigned int level) {
  CUDA_ARRAY3D_DESCRIPTOR d = base;
  auto halve = [level](size_t extent) -> size_t {
    if (extent == 0) return 0;
    return std::max<size_t>(level >= 64 ? 0 : extent >> level, 1);
  };
  d.Width = halve(base.Width);
  d.Height = halve(base.Height);
  if (!(base.Flags & (CUDA_ARRAY3D_LAYERED | CUDA_ARRAY3D_CUBEMAP))) d.Depth = halve(base.Depth);
  return d;
}

unsigned int MaxMipmapLevels(const CUDA_ARRAY3D_DESCRIPTOR& desc) {
  size_t largest = std::max(desc.Width, desc.Height);
  if (!(desc.Flags & (CUDA_ARRAY3D_LAYERED | CUDA_ARRAY3D_CUBEMAP))) largest = std::max(largest, desc.Depth);
  unsigned int levels = 1;
  while (largest > 1) {
    largest >>= 1;
    ++levels;
  }
  return levels;
}

// A mipmapped array: the sum of ArrayBytes over its levels (see LevelDescriptor); nullopt when
// the descriptor or the level count (1 .. floor(log2(largest extent)) + 1) is invalid.
std::optional<uint64_t> MipmappedArrayBytes(const CUDA_ARRAY3D_DESCRIPTOR& desc, unsigned int levels) {
  if (levels == 0 || levels > MaxMipmapLevels(desc)) return std::nullopt;
  uint64_t total = 0;
  for (unsigned int level = 0; level < levels; ++level) {
    const auto bytes = ArrayBytes(LevelDescriptor(desc, level));
    if (!bytes || __builtin_add_overflow(total, *bytes, &total)) return std::nullopt;
  }
  return total;
}

}  // namespace gpuslice
