// GPU UUIDs as nvidia-smi prints them: "GPU-" and 16 bytes of lowercase hex grouped 4-2-2-2-6.
#include <cstdio>
#include <optional>
#include <string>

#include "broker/uuid.h"

namespace gpuslice::broker {
namespace {

// Where the dashes go after the prefix, as byte counts of each group.
constexpr int kGroups[] = {4, 2, 2, 2, 6};
constexpr char kPrefix[] = "GPU-";

// The digit's value; nullopt for a character that is no hex digit.
std::optional<int> HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return std::nullopt;
}

}  // namespace

std::string FormatUuid(const uint8_t (&uuid)[16]) {
  char text[41];  // "GPU-" + 32 hex digits + 4 dashes + NUL
  char* out = text;
  out += std::snprintf(out, 5, "%s", kPrefix);
  int byte = 0;
  for (int group = 0; group < 5; ++group) {
    if (group > 0) *out++ = '-';
    for (int i = 0; i < kGroups[group]; ++i, ++byte) out += std::snprintf(out, 3, "%02x", uuid[byte]);
  }
  try {
    return std::string(text, out);
  } catch (...) {
    return std::string();  // no exception leaves the library
  }
}

bool ParseUuid(const std::string& text, uint8_t (&uuid)[16]) {
  constexpr size_t kPrefixLength = sizeof kPrefix - 1;
  if (text.size() != kPrefixLength + 36 || text.compare(0, kPrefixLength, kPrefix) != 0) return false;
  uint8_t parsed[16];
  size_t at = kPrefixLength;
  int byte = 0;
  for (int group = 0; group < 5; ++group) {
    if (group > 0 && text[at++] != '-') return false;
    for (int i = 0; i < kGroups[group]; ++i, ++byte) {
      const std::optional<int> high = HexValue(text[at++]);
      const std::optional<int> low = HexValue(text[at++]);
      if (!high || !low) return false;
      parsed[byte] = static_cast<uint8_t>(*high << 4 | *low);
    }
  }
  for (int i = 0; i < 16; ++i) uuid[i] = parsed[i];
  return true;
}

}  // namespace gpuslice::broker
