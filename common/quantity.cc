#include "common/quantity.h"

#include <array>
#include <utility>

namespace gpuslice {

std::optional<uint64_t> ParseUnsigned(std::string_view text) {
  if (text.empty() || text.size() > 20) return std::nullopt;
  uint64_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    const uint64_t digit = static_cast<uint64_t>(c - '0');
    if (value > (UINT64_MAX - digit) / 10) return std::nullopt;
    value = value * 10 + digit;
  }
  return value;
}

std::optional<uint64_t> ParseByteQuantity(std::string_view text) {
  static constexpr std::array<std::pair<std::string_view, uint64_t>, 9> kSuffixes{{
      {"Ki", 1ULL << 10},
      {"Mi", 1ULL << 20},
      {"Gi", 1ULL << 30},
      {"Ti", 1ULL << 40},
      {"k", 1000ULL},
      {"K", 1000ULL},
      {"M", 1000ULL * 1000},
      {"G", 1000ULL * 1000 * 1000},
      {"T", 1000ULL * 1000 * 1000 * 1000},
  }};
  uint64_t multiplier = 1;
  for (const auto& [suffix, factor] : kSuffixes) {
    if (text.size() > suffix.size() && text.ends_with(suffix)) {
      text.remove_suffix(suffix.size());
      multiplier = factor;
      break;
    }
  }
  const auto number = ParseUnsigned(text);
  if (!number) return std::nullopt;
  if (*number != 0 && multiplier > UINT64_MAX / *number) return std::nullopt;
  return *number * multiplier;
}

}  // namespace gpuslice
