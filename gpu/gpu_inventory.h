// The node's GPUs as NVML reports them (gpu/nvml_library.h: libnvidia-ml.so.1 loaded with dlopen,
// the real library on a node, the simulated one, sim/nvml, in the tests): what the device plugin
// and the DRA driver serve, the MIG instances gpuslicectl names, each device's health and the
// driver's XID errors. Nothing links NVML, so a tool starts, and says why it cannot work, on a
// node without a driver.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "common/nvml_api.h"
#include "common/status.h"
#include "gpu/nvml_library.h"

namespace gpuslice::gpu {

// A device work runs on: a whole GPU, or a MIG instance of a GPU in MIG mode (a MIG-mode GPU
// runs work only inside its instances, so then its instances are listed and not the GPU).
struct GpuInfo {
  int index = 0;     // NVML index of the GPU (PCI bus order); a MIG instance's parent's
  std::string uuid;  // "GPU-...", or "MIG-..." for an instance (what NVIDIA_VISIBLE_DEVICES takes)
  std::string name;
  uint64_t total_memory = 0;     // bytes
  int mig_index = -1;            // the instance's NVML MIG device index on its GPU; -1: a whole GPU
  std::string parent_uuid;       // an instance's GPU; empty for a whole GPU
  std::string parent_name;       // an instance's GPU's name; empty for a whole GPU
  std::optional<int> numa_node;  // the NUMA node NVML reports the GPU closest to; none: unknown
};

// A GPU NVML lists but that could not be described at discovery (lost, in need of a reset):
// left out of what a tool serves, with the reason for the log.
struct LeftOutGpu {
  int index = 0;
  std::string reason;
};

// An XID error the driver reported for a GPU (NVML's critical-XID events), by NVML index.
struct XidEvent {
  int index = 0;
  unsigned long long xid = 0;
};

// What discovery found: the GPUs (and instances) to serve, and those left out.
struct Discovery {
  std::vector<GpuInfo> gpus;
  std::vector<LeftOutGpu> left_out;
};

class GpuInventory {
 public:
  // Loads `library` (a file name the loader searches for, or a path) and initialises NVML. An
  // error with one line when the library, a symbol or nvmlInit is missing. The error lines of
  // this class name no program: the caller prefixes its own.
  static Result<std::unique_ptr<GpuInventory>> Open(const std::string& library);
  ~GpuInventory();
  GpuInventory(const GpuInventory&) = delete;
  GpuInventory& operator=(const GpuInventory&) = delete;

  // Every GPU NVML lists, each GPU in MIG mode as its MIG instances (in NVML's order; none when
  // it has no instance yet). A GPU that does not answer (lost at start) is left out, so that
  // the healthy ones are still served. An error with one line when NVML itself fails (no
  // device count).
  Result<Discovery> Discover();
  // Whether the GPU (or instance) still answers NVML as a working device: its handle, UUID and
  // memory can be read and the UUID is still the one discovered. A GPU that fell off the bus or needs a reset
  // answers NVML_ERROR_GPU_IS_LOST (or another error) there.
  bool Healthy(const GpuInfo& gpu) { return Problem(gpu).empty(); }
  // Why the GPU (or instance) is not healthy, in one line naming the NVML call and its error
  // ("nvmlDeviceGetUUID: GPU is lost"); empty when it is. `lost` (when given) tells whether the
  // error is of a GPU gone or in need of a reset, rather than a passing one.
  std::string Problem(const GpuInfo& gpu, bool* lost = nullptr);

  // NVML's critical-XID events for every GPU NVML lists (a MIG instance's come as its GPU's).
  // An error with one line when the driver offers no event API (then XIDs are not watched).
  Status WatchXids();
  // The XIDs reported since the last call, waiting up to `timeout_ms` for the first one.
  std::vector<XidEvent> WaitForXids(int timeout_ms);

  // The driver's version (nvmlSystemGetDriverVersion, "550.54.15"); empty when NVML cannot say.
  std::string DriverVersion();

 private:
  struct Events;
  explicit GpuInventory(std::unique_ptr<const NvmlLibrary> nvml);
  nvmlReturn_t Describe(nvmlDevice_t device, GpuInfo* info, const char** call);
  std::unique_ptr<const NvmlLibrary> nvml_;
  Mutex mutex_;  // NVML is thread-safe; this only orders discovery and health polls (guards no member)
  std::unique_ptr<Events> events_;
};

}  // namespace gpuslice::gpu
