// Text read from the shared segment (tenant names) is bytes any process could have written: a
// person reads it in a terminal (gpuslicectl status and top), a log line or a scraped label.
// Printable() shows it as one line of printable ASCII, every other byte as \xNN, so that a written
// name can neither inject terminal escapes nor forge rows, and is never invalid UTF-8. A valid
// tenant name (letters, digits, '.', '_', '-') comes out unchanged.
#pragma once

#include <string>
#include <string_view>

namespace gpuslice {

inline std::string Printable(std::string_view bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size());
  for (const char c : bytes) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte >= 0x20 && byte < 0x7f && byte != '\\') {
      out += c;
    } else {
      out += "\\x";
      out += kHex[byte >> 4];
      out += kHex[byte & 0xf];
    }
  }
  return out;
}

}  // namespace gpuslice
