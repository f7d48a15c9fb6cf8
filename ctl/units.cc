#include "ctl/units.h"

#include <fmt/format.h>

#include <array>
#include <cctype>
#include <utility>

namespace gpuslice::ctl {

std::string FormatBytes(uint64_t bytes) {
  static constexpr std::array<const char*, 6> kUnits = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  size_t unit = 0;
  while (unit + 1 < kUnits.size() && bytes >= (uint64_t{1} << (10 * (unit + 1)))) ++unit;
  if (unit == 0) return fmt::format("{} B", bytes);
  const double value = static_cast<double>(bytes) / static_cast<double>(uint64_t{1} << (10 * unit));
  std::string number = fmt::format("{:.2f}", value);
  while (number.back() == '0') number.pop_back();
  if (number.back() == '.') number.pop_back();
  return number + " " + kUnits[unit];
}

double Percent(uint64_t part, uint64_t whole) {
  if (whole == 0) return 0;
  return static_cast<double>(part) * 100.0 / static_cast<double>(whole);
}

std::string FormatPercent(uint64_t part, uint64_t whole) {
  if (whole == 0) return "-";
  return fmt::format("{:.1f}%", Percent(part, whole));
}

bool ParseDuration(std::string_view text, uint64_t* ns) {
  struct Unit {
    std::string_view name;
    uint64_t ns;
  };
  static constexpr std::array<Unit, 5> kUnits = {
      {{"ns", 1}, {"us", 1'000}, {"\u00b5s", 1'000}, {"ms", 1'000'000}, {"s", 1'000'000'000}}};
  size_t at = 0;
  unsigned __int128 whole = 0;
  size_t whole_digits = 0;
  while (at < text.size() && std::isdigit(static_cast<unsigned char>(text[at]))) {
    whole = whole * 10 + static_cast<unsigned>(text[at++] - '0');
    if (++whole_digits > 20) return false;  // past 2^64 whatever the unit
  }
  unsigned __int128 fraction = 0, scale = 1;
  size_t fraction_digits = 0;
  if (at < text.size() && text[at] == '.') {
    ++at;
    while (at < text.size() && std::isdigit(static_cast<unsigned char>(text[at]))) {
      if (fraction_digits < 18) {  // below a nanosecond of any unit: dropped
        fraction = fraction * 10 + static_cast<unsigned>(text[at] - '0');
        scale *= 10;
      }
      ++fraction_digits;
      ++at;
    }
    if (fraction_digits == 0) return false;  // "1.ms"
  }
  if (whole_digits == 0) return false;  // ".5ms", "ms", ""
  if (at < text.size() && text[at] == ' ') ++at;
  const std::string_view unit = text.substr(at);
  for (const Unit& candidate : kUnits) {
    if (unit != candidate.name) continue;
    const unsigned __int128 total = whole * candidate.ns + fraction * candidate.ns / scale;
    if (total > UINT64_MAX) return false;
    *ns = static_cast<uint64_t>(total);
    return true;
  }
  return false;
}

std::string FormatDuration(uint64_t ns) {
  static constexpr std::array<std::pair<const char*, uint64_t>, 3> kUnits = {
      {{"s", 1'000'000'000}, {"ms", 1'000'000}, {"us", 1'000}}};
  for (const auto& [name, size] : kUnits) {
    if (ns < size) continue;
    std::string number = fmt::format("{:.3f}", static_cast<double>(ns) / static_cast<double>(size));
    while (number.back() == '0') number.pop_back();
    if (number.back() == '.') number.pop_back();
    return number + " " + name;
  }
  return fmt::format("{} ns", ns);
}

}  // namespace gpuslice::ctl
