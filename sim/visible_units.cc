#include "sim/visible_units.h"

#include <algorithm>
#include <cctype>
#include <optional>
#include <string_view>

#include "sim/sim_config.h"

namespace gpuslice::sim {
namespace {

bool MigEnabled(const SimSegment& s, int gpu) { return (s.mig.enabled_gpus >> gpu) & 1u; }

// A GPU in MIG mode's first instance; none when it has no instance.
std::optional<int> FirstInstanceOf(const SimSegment& s, int gpu) {
  for (uint32_t i = 0; i < s.mig.instance_count; ++i)
    if (s.mig.instances[i].gpu == gpu) return kMaxDevices + static_cast<int>(i);
  return std::nullopt;
}

// The unit an entry names; none when it names no unit.
std::optional<int> Resolve(const SimSegment& s, std::string_view entry) {
  const int devices = static_cast<int>(s.device_count);
  auto whole = [&](int gpu) { return MigEnabled(s, gpu) ? FirstInstanceOf(s, gpu) : std::optional<int>(gpu); };
  if (!entry.empty() && std::isdigit(static_cast<unsigned char>(entry[0]))) {
    int n = 0;
    for (char c : entry) {
      if (!std::isdigit(static_cast<unsigned char>(c))) return std::nullopt;
      n = n * 10 + (c - '0');
      if (n >= devices) return std::nullopt;
    }
    return whole(n);
  }
  auto matches = [&](const std::string& uuid) { return entry.size() > 4 && uuid.compare(0, entry.size(), entry) == 0; };
  if (entry.substr(0, 4) == "GPU-") {
    for (int g = 0; g < devices; ++g)
      if (matches(FormatGpuUuid(s.devices[g].config.uuid))) return whole(g);
  } else if (entry.substr(0, 4) == "MIG-") {
    for (uint32_t i = 0; i < s.mig.instance_count; ++i)
      if (matches(FormatMigUuid(s.mig.units[i].config.uuid))) return kMaxDevices + static_cast<int>(i);
  }
  return std::nullopt;
}

}  // namespace

std::vector<int> VisibleUnits(const SimSegment& s, const char* visible) {
  std::vector<int> units;
  bool have_mig = false;
  auto add = [&](std::optional<int> found) {
    if (!found) return;
    const int unit = *found;
    const bool mig = unit >= kMaxDevices;
    if (mig && have_mig) return;
    for (int u : units)
      if (u == unit) return;
    have_mig = have_mig || mig;
    units.push_back(unit);
  };
  if (visible == nullptr) {
    for (int g = 0; g < static_cast<int>(s.device_count); ++g)
      add(MigEnabled(s, g) ? FirstInstanceOf(s, g) : std::optional<int>(g));
    return units;
  }
  std::string_view list(visible);
  size_t pos = 0;
  while (pos <= list.size()) {
    const size_t comma = std::min(list.find(',', pos), list.size());
    std::string_view entry = list.substr(pos, comma - pos);
    while (!entry.empty() && entry.front() == ' ') entry.remove_prefix(1);
    while (!entry.empty() && entry.back() == ' ') entry.remove_suffix(1);
    const std::optional<int> unit = Resolve(s, entry);
    if (!unit) break;  // CUDA ignores everything from an invalid entry on
    add(unit);
    pos = comma + 1;
  }
  return units;
}

}  // namespace gpuslice::sim
