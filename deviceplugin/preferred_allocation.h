// GetPreferredAllocation's policy, decided by the placement library (place/, docs/placement.md)
// over the node's state as it models it: each GPU's free units as milli-GPU. A container that
// fits on one GPU goes to the GPU that fits it most tightly (place's best fit), so that large
// requests still find a GPU with room later; a container of k whole GPUs and a rest takes k free
// GPUs of one NVLink island (place's IslandFreeGpus) and its rest by best fit again. Only a hint:
// the kubelet may ignore it (it does when the plugin is slow or the request cannot be met), and
// then Allocate handles units spread over GPUs (docs/kubernetes.md).
#pragma once

#include <string>
#include <vector>

#include "deviceplugin/device_catalog.h"

namespace gpuslice::deviceplugin {

// Chooses `size` IDs from `available` (all of `must_include` among them). The required IDs pull
// the rest onto their GPUs. NVLink islands are `island_size` consecutive catalog positions
// (0: none, the node's GPUs are one island). When neither one GPU nor whole free GPUs can take
// the request, takes from the GPUs with the most available units first (fewest GPUs). False
// with one line in *error when the IDs are not this catalog's or there are too few.
bool PreferUnits(const DeviceCatalog& catalog, UnitKind kind, const std::vector<std::string>& available,
                 const std::vector<std::string>& must_include, int size, int island_size,
                 std::vector<std::string>* chosen, std::string* error);

}  // namespace gpuslice::deviceplugin
