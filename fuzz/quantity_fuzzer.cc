// libFuzzer target: byte quantities and plain integers (common/quantity.h). Any input must be
// parsed or refused, never crash, and a value that parses must mean exactly what it says: the
// result is recomputed here independently (with 128-bit arithmetic) and compared.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "common/quantity.h"

namespace {

// The reference: digits times the suffix's factor, nullopt past 2^64 - 1.
std::optional<uint64_t> Reference(std::string_view text) {
  struct Suffix {
    std::string_view text;
    unsigned __int128 factor;
  };
  static constexpr Suffix kSuffixes[] = {{"Ki", 1ULL << 10}, {"Mi", 1ULL << 20}, {"Gi", 1ULL << 30},
                                         {"Ti", 1ULL << 40}, {"k", 1000},        {"K", 1000},
                                         {"M", 1000000},     {"G", 1000000000},  {"T", 1000000000000}};
  unsigned __int128 factor = 1;
  for (const Suffix& suffix : kSuffixes) {
    if (text.size() > suffix.text.size() && text.ends_with(suffix.text)) {
      text.remove_suffix(suffix.text.size());
      factor = suffix.factor;
      break;
    }
  }
  if (text.empty() || text.size() > 20) return std::nullopt;
  unsigned __int128 value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    value = value * 10 + static_cast<unsigned>(c - '0');
  }
  value *= factor;
  if (value > UINT64_MAX) return std::nullopt;
  return static_cast<uint64_t>(value);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  if (gpuslice::ParseByteQuantity(text) != Reference(text)) std::abort();
  const auto plain = gpuslice::ParseUnsigned(text);
  if (plain) {
    // A plain integer is a quantity without suffix, of the same value.
    const auto quantity = gpuslice::ParseByteQuantity(text);
    if (!quantity || *quantity != *plain) std::abort();
  }
  return 0;
}
