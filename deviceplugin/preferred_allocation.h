// GetPreferredAllocation's policy, decided by the node's GPU choice (gpu/gpu_choice.h) over each
// device's free slices. A container of at most slicesPerGpu slices goes to the device that fits
// it most tightly (best fit), so that large requests still find a device with room later; a
// container of k × slicesPerGpu slices takes k free devices of one NVLink island. Anything else
// has no answer: a slice is on one device, and the error (the kubelet fails the pod's admission
// with it) says why. Only a hint: a kubelet that ignores it gets the same refusal from Allocate when
// its choice spans devices (docs/kubernetes.md).
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "deviceplugin/device_catalog.h"

namespace gpuslice::deviceplugin {

// Chooses `size` IDs from `available` (all of `must_include` among them). The required IDs pull
// the rest onto their device. NVLink islands are `island_size` consecutive NVML indices (0: none,
// the node's GPUs are one island). An InvalidArgument error with one line when the IDs are not
// this catalog's or too few; a ResourceExhausted one when no single device (nor whole free
// devices, for a multiple of slicesPerGpu) can take the request: the line names the request and
// the most any one device has free.
Result<std::vector<std::string>> PreferSlices(const DeviceCatalog& catalog, const std::vector<std::string>& available,
                                              const std::vector<std::string>& must_include, int size, int island_size);

}  // namespace gpuslice::deviceplugin
