// The simulated NVML's topology query: the CPUs near a GPU.
#include "sim/nvml/nvml_library.h"  // first: NVML's declarations as this library exports them

// Not in common/nvml_api.h (the shim does not use it); declared here with nvml.h's signature so
// that it is exported.
#pragma GCC visibility push(default)
extern "C" nvmlReturn_t nvmlDeviceGetCpuAffinityWithinScope(nvmlDevice_t device, unsigned int nodeSetSize,
                                                            unsigned long* nodeSet, unsigned int scope);
#pragma GCC visibility pop

using namespace gpuslice::sim;
using namespace gpuslice::sim::nvml;

extern "C" {

// The simulated node is a two-socket server: its GPUs split evenly over NUMA nodes 0 and 1 in
// index order (one GPU: node 0). Scope node (0) or socket (1) both answer that node; a MIG
// handle, as on NVIDIA's driver, does not answer topology queries (ask its GPU).
nvmlReturn_t nvmlDeviceGetCpuAffinityWithinScope(nvmlDevice_t device, unsigned int nodeSetSize, unsigned long* nodeSet,
                                                 unsigned int scope) try {
  GPUSLICE_SIM_ENTRY();
  return WithDevice(device, [&](Session& session, int ordinal) {
    if (nodeSet == nullptr || nodeSetSize == 0 || scope > 1) return NVML_ERROR_INVALID_ARGUMENT;
    if (session.IsMig(ordinal)) return NVML_ERROR_NOT_SUPPORTED;
    const int count = session.state().device_count();
    const int node = count >= 2 ? ordinal * 2 / count : 0;
    for (unsigned int i = 0; i < nodeSetSize; ++i) nodeSet[i] = 0;
    nodeSet[0] = 1UL << node;
    return NVML_SUCCESS;
  });
} catch (...) {
  return EntryFailed<nvmlReturn_t>(__func__);
}

}  // extern "C"
