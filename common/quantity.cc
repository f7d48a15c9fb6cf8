#include "common/quantity.h"

#include <algorithm>
#include <array>
#include <string>
#include <utility>

namespace gpuslice {
namespace {

// Far past any exponent a byte count can have (10^20 > 2^64), far from int64's limits.
constexpr int64_t kExponentCap = 1'000'000;

bool Digit(char c) { return c >= '0' && c <= '9'; }

// Takes the digits at the front of `text` (none: empty).
std::string_view TakeDigits(std::string_view* text) {
  size_t n = 0;
  while (n < text->size() && Digit((*text)[n])) ++n;
  const std::string_view digits = text->substr(0, n);
  text->remove_prefix(n);
  return digits;
}

// The suffix's power of ten and power of two; false for no suffix of the grammar.
bool ReadSuffix(std::string_view suffix, int64_t* ten, int* two) {
  static constexpr std::array<std::pair<std::string_view, int>, 6> kBinary{
      {{"Ki", 10}, {"Mi", 20}, {"Gi", 30}, {"Ti", 40}, {"Pi", 50}, {"Ei", 60}}};
  // "K" is not Kubernetes' but has always been accepted here, as "k".
  static constexpr std::array<std::pair<std::string_view, int>, 9> kDecimal{
      {{"", 0}, {"m", -3}, {"k", 3}, {"K", 3}, {"M", 6}, {"G", 9}, {"T", 12}, {"P", 15}, {"E", 18}}};
  *ten = 0;
  *two = 0;
  for (const auto& [name, power] : kBinary) {
    if (suffix == name) return *two = power, true;
  }
  for (const auto& [name, power] : kDecimal) {
    if (suffix == name) return *ten = power, true;
  }
  // <decimalExponent> ::= "e" <signedNumber> | "E" <signedNumber>, the number an integer.
  if (suffix.size() < 2 || (suffix[0] != 'e' && suffix[0] != 'E')) return false;
  suffix.remove_prefix(1);
  const bool negative = suffix[0] == '-';
  if (suffix[0] == '-' || suffix[0] == '+') suffix.remove_prefix(1);
  const std::string_view digits = TakeDigits(&suffix);
  if (digits.empty() || !suffix.empty()) return false;
  int64_t exponent = 0;
  for (const char c : digits) exponent = std::min(kExponentCap, exponent * 10 + (c - '0'));
  *ten = negative ? -exponent : exponent;
  return true;
}

// `digits` (decimal, most significant first) times two, in place.
void Double(std::string* digits) {
  int carry = 0;
  for (auto it = digits->rbegin(); it != digits->rend(); ++it) {
    const int d = (*it - '0') * 2 + carry;
    *it = static_cast<char>('0' + d % 10);
    carry = d / 10;
  }
  if (carry) digits->insert(digits->begin(), static_cast<char>('0' + carry));
}

}  // namespace

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
  // <signedNumber>: an optional sign, then <digits>, <digits>.<digits>, <digits>. or .<digits>.
  bool negative = false;
  if (!text.empty() && (text[0] == '+' || text[0] == '-')) {
    negative = text[0] == '-';
    text.remove_prefix(1);
  }
  const std::string_view whole = TakeDigits(&text);
  std::string_view fraction;
  if (!text.empty() && text[0] == '.') {
    text.remove_prefix(1);
    fraction = TakeDigits(&text);
  }
  if (whole.empty() && fraction.empty()) return std::nullopt;
  int64_t ten = 0;
  int two = 0;
  if (!ReadSuffix(text, &ten, &two)) return std::nullopt;
  // The value is `digits` x 10^ten x 2^two, exactly: the significant digits, with the fraction's
  // length taken off the power of ten.
  std::string digits = std::string(whole) + std::string(fraction);
  ten -= static_cast<int64_t>(fraction.size());
  const size_t first = digits.find_first_not_of('0');
  if (first == std::string::npos) return 0;  // zero, whatever its sign and suffix
  if (negative) return std::nullopt;
  digits.erase(0, first);
  const auto strip_zeros = [&] {
    while (digits.back() == '0') {
      digits.pop_back();
      ++ten;
    }
  };
  strip_zeros();
  // Whole and at most 2^64 - 1, the value has at most 20 digits more than the places the power of
  // ten takes off, and at most 60 places: only the doublings of Ki..Ei (60 at most) can make a
  // fraction whole, one place each. Anything longer is refused before the arithmetic.
  if (ten < -60 || static_cast<int64_t>(digits.size()) > 20 + std::max<int64_t>(0, -ten)) return std::nullopt;
  for (int i = 0; i < two; ++i) Double(&digits);
  strip_zeros();
  // A part of a byte is no byte count ("100m" is a tenth of a byte).
  if (ten < 0) return std::nullopt;
  if (static_cast<int64_t>(digits.size()) + ten > 20) return std::nullopt;  // at least 10^20
  digits.append(static_cast<size_t>(ten), '0');
  return ParseUnsigned(digits);
}

}  // namespace gpuslice
