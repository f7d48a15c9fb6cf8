// Which of a node's devices takes a request: the device plugin's answer to the kubelet's
// GetPreferredAllocation (deviceplugin/preferred_allocation.h). A share of one device goes to
// the device it fits most tightly, so that large requests still find a device with room later;
// a request of whole devices takes free devices of one NVLink island, the island with the fewest
// free devices that holds them all, so that bigger islands stay whole. The rules are those of
// the placement simulator's best fit (gpuslice-place, docs/placement.md), here over one node and
// in the caller's units, so that the choice is exact.
#pragma once

#include <optional>
#include <span>
#include <vector>

namespace gpuslice::gpu {

// The device with room for `units` (free[d] >= units) that has the fewest free, the first on
// ties; none when no device has room.
std::optional<size_t> BestFitDevice(std::span<const int> free, int units);

// `count` wholly free devices (free[d] == whole): NVLink islands are `island_size` consecutive
// devices (0: one island of all). Of the islands that hold `count` wholly free devices, the one
// with the fewest (the first on ties), and its first `count`; when no island does, the first
// `count` anywhere; empty when the node has fewer.
std::vector<int> WholeFreeDevices(std::span<const int> free, int whole, int count, int island_size);

}  // namespace gpuslice::gpu
