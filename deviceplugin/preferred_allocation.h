// GetPreferredAllocation's policy: pack a container's units onto one GPU, the one that fits them
// most tightly (best fit), so that large requests still find a GPU with room later. Only a
// hint: the kubelet may ignore it (it does when the plugin is slow or the request cannot be
// met), and then Allocate handles units spread over GPUs (docs/kubernetes.md).
#pragma once

#include <string>
#include <vector>

#include "deviceplugin/device_catalog.h"

namespace gpuslice::deviceplugin {

// Chooses `size` IDs from `available` (all of `must_include` among them). When no single GPU
// has enough, takes from the GPUs with the most available units first (fewest GPUs). False
// with one line in *error when the IDs are not this catalog's or there are too few.
bool PreferUnits(const DeviceCatalog& catalog, UnitKind kind, const std::vector<std::string>& available,
                 const std::vector<std::string>& must_include, int size, std::vector<std::string>* chosen,
                 std::string* error);

}  // namespace gpuslice::deviceplugin
