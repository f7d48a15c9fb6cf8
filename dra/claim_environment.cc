#include "dra/claim_environment.h"

#include <fmt/format.h>

#include "shim/option_values.h"

namespace gpuslice::dra {

Result<std::map<std::string, std::string>> ClaimEnvironment(const ClaimDevice& device, const DriverConfig& config,
                                                            const std::string& tenant) {
  std::map<std::string, std::string> env;
  env["NVIDIA_VISIBLE_DEVICES"] = device.uuid;
  env["LD_PRELOAD"] = config.container_library;
  env["GPUSLICE_STATE_DIR"] = config.container_state_dir;
  env["GPUSLICE_TENANT"] = tenant;
  // The booked memory is guaranteed (the request); the configuration's memoryLimit, when given,
  // is what the tenant may borrow up to (docs/accounting.md, "Requests and limits").
  env["GPUSLICE_MEMORY_REQUEST"] = shim::QuotaText(device.memory);
  env["GPUSLICE_MEMORY_LIMIT"] = shim::QuotaText(device.memory_limit ? device.memory_limit : device.memory);
  env["GPUSLICE_COMPUTE_REQUEST"] = fmt::to_string(device.compute);
  if (!device.compute_class.empty()) env["GPUSLICE_COMPUTE_CLASS"] = device.compute_class;
  if (device.compute_limit) env["GPUSLICE_COMPUTE_LIMIT"] = fmt::to_string(device.compute_limit);
  if (Status accepted = shim::ShimAccepts(env); !accepted.ok()) return accepted;
  return env;
}

}  // namespace gpuslice::dra
