// The node's GPUs as NVML reports them, through libnvidia-ml.so.1 loaded with dlopen: the real
// library on a node, the simulated one (sim/nvml) in the tests. Nothing links NVML, so the plugin
// starts, and says why it cannot work, on a node without a driver.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace gpuslice::deviceplugin {

struct GpuInfo {
  int index = 0;             // NVML index (PCI bus order)
  std::string uuid;          // "GPU-..."
  std::string name;
  uint64_t total_memory = 0;  // bytes
};

class GpuInventory {
 public:
  // Loads `library` (a file name the loader searches for, or a path) and initialises NVML.
  // nullptr with one line in *error when the library, a symbol or nvmlInit is missing.
  static std::unique_ptr<GpuInventory> Open(const std::string& library, std::string* error);
  ~GpuInventory();
  GpuInventory(const GpuInventory&) = delete;
  GpuInventory& operator=(const GpuInventory&) = delete;

  // Every GPU NVML lists. False with one line in *error when NVML fails.
  bool Discover(std::vector<GpuInfo>* gpus, std::string* error);
  // Whether the GPU still answers NVML as a working device: its handle, UUID and memory can be
  // read and the UUID is still the one discovered. A GPU that fell off the bus or needs a reset
  // answers NVML_ERROR_GPU_IS_LOST (or another error) there.
  bool Healthy(const GpuInfo& gpu);

 private:
  struct Api;
  explicit GpuInventory(std::unique_ptr<Api> api);
  std::unique_ptr<Api> api_;
};

}  // namespace gpuslice::deviceplugin
