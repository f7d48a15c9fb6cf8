// Parsing of byte quantities as Kubernetes writes them ("512Mi", "4Gi", "4G", "1e9", "1.5Gi",
// "1048576"): the Kubernetes quantity grammar (k8s.io/apimachinery resource.Quantity).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace gpuslice {

// Returns the number of bytes, or nullopt for anything that is not a quantity: an optional sign,
// a decimal number (12, 1.5, 1., .5) and an optional suffix — Ki, Mi, Gi, Ti, Pi, Ei (powers of
// 1024), m, k, M, G, T, P, E (powers of 1000; K as k too), or an exponent e<n> / E<n> (1e9, 2E9,
// 15e8). The value must be a whole number of bytes (1.5Ki is 1536; 100m, a tenth of a byte, and
// 1.5 are refused), not negative (-0 is 0) and at most 2^64-1: larger is refused, never wrapped.
std::optional<uint64_t> ParseByteQuantity(std::string_view text);

// Parses a plain unsigned decimal integer; nullopt on anything else or on overflow.
std::optional<uint64_t> ParseUnsigned(std::string_view text);

}  // namespace gpuslice
