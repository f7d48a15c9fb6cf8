// Parsing of byte quantities as Kubernetes writes them ("512Mi", "4Gi", "4G", "1048576").
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace gpuslice {

// Returns the number of bytes, or nullopt for anything that is not a non-negative quantity
// with an optional suffix k/K, M, G, T (powers of 1000) or Ki, Mi, Gi, Ti (powers of 1024).
// Overflow past 2^64-1 is rejected, never wrapped.
std::optional<uint64_t> ParseByteQuantity(std::string_view text);

// Parses a plain unsigned decimal integer; nullopt on anything else or on overflow.
std::optional<uint64_t> ParseUnsigned(std::string_view text);

}  // namespace gpuslice
