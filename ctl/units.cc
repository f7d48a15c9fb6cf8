#include "ctl/units.h"

#include <fmt/format.h>

#include <array>

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

}  // namespace gpuslice::ctl
