#include "shim/mps_settings.h"

#include <algorithm>
#include <cstdlib>
#include <string>

#include "broker/checked_index.h"
#include "broker/segment_layout.h"
#include "shim/shim_state.h"

namespace gpuslice::shim {
namespace {

bool AnyGpuInMpsMode(const broker::Segment& segment) {
  for (broker::GpuIndex g : broker::UsedGpus(segment)) {
    const broker::GpuEntry& gpu = broker::At(segment, g);
    if (gpu.state.load() == static_cast<uint32_t>(broker::EntryState::kInUse) &&
        gpu.mode.load() == static_cast<uint32_t>(broker::SharingMode::kMps))
      return true;
  }
  return false;
}

// "0=4096M,1=2048M": per ordinal, in MiB. Percentage limits need the device's size, which is
// not known before cuInit, so they are not passed on (gpuslice's own quota still applies).
std::string PinnedMemoryLimits(const ShimOptions& options, int ordinals) {
  std::string value;
  for (int n = 0; n < ordinals; ++n) {
    const auto limit = options.CeilingFor(n);
    if (!limit || limit->percent != 0) continue;
    value += (value.empty() ? "" : ",") + std::to_string(n) + "=" +
             std::to_string(std::max<uint64_t>(1, limit->bytes >> 20)) + "M";
  }
  return value;
}

}  // namespace

void ApplyMpsSettings(ShimState* state) {
  const broker::Segment* segment = state->broker().segment();
  if (!segment || !AnyGpuInMpsMode(*segment)) return;
  const ShimOptions& options = state->options();
  // The MPS variables are read by the driver at its initialisation, which has not happened yet:
  // this is the one moment gpuslice writes to the process's environment.
  if (options.compute_limit_pct < 100 && !std::getenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"))
    setenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", std::to_string(options.compute_limit_pct).c_str(), 0);
  // The GPU count is read from the segment: clamped to the table (a forged one must not make
  // this loop run for billions of ordinals).
  const int ordinals = std::max(8, broker::UsedGpus(*segment).size());
  const std::string pinned = PinnedMemoryLimits(options, ordinals);
  if (!pinned.empty() && !std::getenv("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"))
    setenv("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", pinned.c_str(), 0);
}

}  // namespace gpuslice::shim
