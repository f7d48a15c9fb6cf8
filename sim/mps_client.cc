#include "sim/mps_client.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <optional>
#include <string_view>

#include "common/quantity.h"

namespace gpuslice::sim {
namespace {

const char* Env(const char* name) {
  const char* value = std::getenv(name);
  return (value && *value) ? value : nullptr;
}

// "1G", "512MB", "4096M", "1073741824": MPS's sizes, binary units, an optional trailing B.
std::optional<uint64_t> ParseMpsSize(std::string_view text) {
  if (!text.empty() && (text.back() == 'B' || text.back() == 'b')) text.remove_suffix(1);
  if (text.empty()) return std::nullopt;
  std::string binary(text);
  const char last = binary.back();
  if (last == 'K' || last == 'M' || last == 'G' || last == 'T' || last == 'k' || last == 'm' || last == 'g' ||
      last == 't') {
    binary.back() = static_cast<char>(std::toupper(last));
    binary += "i";
  }
  return ParseByteQuantity(binary);
}

}  // namespace

bool LoadMpsClientSettings(MpsClientSettings* out, std::string* error) {
  *out = MpsClientSettings{};
  if (const char* v = Env("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE")) {
    const auto n = ParseUnsigned(v);
    if (!n || *n < 1 || *n > 100) {
      *error = std::string("gpuslice-sim: invalid CUDA_MPS_ACTIVE_THREAD_PERCENTAGE='") + v +
               "'; expected a percentage from 1 to 100, e.g. 50";
      return false;
    }
    out->active_thread_percentage = static_cast<int>(*n);
  }
  if (const char* v = Env("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT")) {
    std::string_view list(v);
    size_t pos = 0;
    while (pos < list.size()) {
      const size_t comma = std::min(list.find(',', pos), list.size());
      const std::string_view item = list.substr(pos, comma - pos);
      pos = comma + 1;
      const size_t eq = item.find('=');
      const auto ordinal = eq == item.npos ? std::nullopt : ParseUnsigned(item.substr(0, eq));
      const auto bytes = eq == item.npos ? std::nullopt : ParseMpsSize(item.substr(eq + 1));
      if (!ordinal || *ordinal >= static_cast<uint64_t>(kMaxDevices) || !bytes || *bytes == 0) {
        *error = std::string("gpuslice-sim: invalid CUDA_MPS_PINNED_DEVICE_MEM_LIMIT='") + v +
                 "'; expected ordinal=size pairs, e.g. 0=1G,1=512MB";
        return false;
      }
      out->memory_limit[*ordinal] = *bytes;
    }
  }
  return true;
}

}  // namespace gpuslice::sim
