// libFuzzer target: byte quantities and plain integers (common/quantity.h). Any input must be
// parsed or refused, never crash, and a value that parses must mean exactly what it says: the
// result is recomputed here independently (a rational number in 128-bit arithmetic, where the
// input is short enough for it) and compared.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string_view>

#include "common/quantity.h"

namespace {

using u128 = unsigned __int128;
constexpr u128 kU64Max = UINT64_MAX;

// The reference's verdict: a value, a refusal, or "too long for 128 bits" (not compared).
struct Verdict {
  bool known = true;
  std::optional<uint64_t> value;
};

Verdict Known(std::optional<uint64_t> value) { return {true, value}; }
Verdict Unknown() { return {false, std::nullopt}; }

bool PowerOf10(int64_t n, u128* out) {
  if (n < 0 || n > 38) return false;
  u128 p = 1;
  for (int64_t i = 0; i < n; ++i) p *= 10;
  *out = p;
  return true;
}

Verdict Reference(std::string_view s) {
  size_t i = 0;
  bool negative = false;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) negative = s[i++] == '-';
  u128 mantissa = 0;
  int significant = 0, fraction_places = 0, digits = 0;
  bool in_fraction = false;
  for (; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '.' && !in_fraction) {
      in_fraction = true;
      continue;
    }
    if (c < '0' || c > '9') break;
    ++digits;
    if (in_fraction) ++fraction_places;
    if (mantissa == 0 && c == '0') continue;
    if (++significant > 38) return Unknown();
    mantissa = mantissa * 10 + static_cast<unsigned>(c - '0');
  }
  if (digits == 0) return Known(std::nullopt);
  const std::string_view suffix = s.substr(i);
  int64_t ten = 0;
  int two = 0;
  struct Named {
    std::string_view name;
    int ten, two;
  };
  static constexpr Named kNamed[] = {{"", 0, 0},    {"m", -3, 0},  {"k", 3, 0},   {"K", 3, 0},   {"M", 6, 0},
                                     {"G", 9, 0},   {"T", 12, 0},  {"P", 15, 0},  {"E", 18, 0},  {"Ki", 0, 10},
                                     {"Mi", 0, 20}, {"Gi", 0, 30}, {"Ti", 0, 40}, {"Pi", 0, 50}, {"Ei", 0, 60}};
  bool matched = false;
  for (const Named& n : kNamed) {
    if (suffix == n.name) ten = n.ten, two = n.two, matched = true;
  }
  if (!matched) {
    if (suffix.size() < 2 || (suffix[0] != 'e' && suffix[0] != 'E')) return Known(std::nullopt);
    size_t j = 1;
    const bool minus = suffix[j] == '-';
    if (suffix[j] == '-' || suffix[j] == '+') ++j;
    if (j == suffix.size()) return Known(std::nullopt);
    int64_t exponent = 0;
    for (; j < suffix.size(); ++j) {
      if (suffix[j] < '0' || suffix[j] > '9') return Known(std::nullopt);
      if (exponent < 100000) exponent = exponent * 10 + (suffix[j] - '0');
    }
    ten = minus ? -exponent : exponent;
  }
  if (mantissa == 0) return Known(0);
  if (negative) return Known(std::nullopt);
  ten -= fraction_places;
  if (ten >= 0) {
    u128 scale = 0;
    if (!PowerOf10(ten, &scale) || mantissa > kU64Max || scale > kU64Max) return Known(std::nullopt);
    const u128 value = mantissa * scale;  // < 2^128: both factors < 2^64
    if (value > kU64Max || (value << two) > kU64Max) return Known(std::nullopt);
    return Known(static_cast<uint64_t>(value << two));
  }
  if (mantissa >> 67) return Unknown();
  u128 denominator = 0;
  // Past 10^38 the denominator exceeds any numerator here (< 2^127): a part of a byte.
  if (!PowerOf10(-ten, &denominator)) return Known(std::nullopt);
  const u128 numerator = mantissa << two;  // < 2^127
  if (numerator % denominator != 0 || numerator / denominator > kU64Max) return Known(std::nullopt);
  return Known(static_cast<uint64_t>(numerator / denominator));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const std::optional<uint64_t> parsed = gpuslice::ParseByteQuantity(text);
  const Verdict reference = Reference(text);
  if (reference.known && parsed != reference.value) std::abort();
  const auto plain = gpuslice::ParseUnsigned(text);
  // A plain integer is a quantity without suffix, of the same value.
  if (plain && (!parsed || *parsed != *plain)) std::abort();
  return 0;
}
