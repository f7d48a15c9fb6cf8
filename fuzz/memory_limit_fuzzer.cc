// libFuzzer target: memory limits, quantities or percentages (shim/options.h ParseMemoryLimit,
// MemoryLimit::QuotaFor). Any input is parsed or refused, never crashes; a parsed limit is
// never zero (a zero quota is not a limit anyone means), a percentage is 1..100, and the quota it
// gives on a device never exceeds the device (percentages) and never wraps.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "shim/options.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto limit = gpuslice::shim::ParseMemoryLimit(text);
  if (!limit) return 0;
  if (limit->percent == 0 && limit->bytes == 0) std::abort();
  if (limit->percent > 100) std::abort();
  if (limit->percent != 0 && !text.ends_with("%")) std::abort();
  for (uint64_t device : {uint64_t{0}, uint64_t{1}, uint64_t{80} << 30, UINT64_MAX}) {
    const uint64_t quota = limit->QuotaFor(device);
    if (limit->percent != 0 && quota > device) std::abort();
    if (limit->percent == 0 && quota != limit->bytes) std::abort();
  }
  return 0;
}
