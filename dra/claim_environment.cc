#include "dra/claim_environment.h"

#include <vector>

#include "shim/options.h"

namespace gpuslice::dra {
namespace {

// "8Gi", "512Mi" or plain bytes: the shortest exact form the shim parses.
std::string Bytes(uint64_t bytes) {
  if (bytes % (1ULL << 30) == 0) return std::to_string(bytes >> 30) + "Gi";
  if (bytes % (1ULL << 20) == 0) return std::to_string(bytes >> 20) + "Mi";
  return std::to_string(bytes);
}

}  // namespace

bool ClaimEnvironment(const ClaimDevice& device, const DriverConfig& config, const std::string& tenant,
                      std::map<std::string, std::string>* env, std::string* error) {
  env->clear();
  (*env)["NVIDIA_VISIBLE_DEVICES"] = device.uuid;
  (*env)["LD_PRELOAD"] = config.container_library;
  (*env)["GPUSLICE_STATE_DIR"] = config.container_state_dir;
  (*env)["GPUSLICE_TENANT"] = tenant;
  (*env)["GPUSLICE_MEMORY_LIMIT"] = Bytes(device.memory);
  (*env)["GPUSLICE_COMPUTE_REQUEST"] = std::to_string(device.compute);
  if (!device.compute_class.empty()) (*env)["GPUSLICE_COMPUTE_CLASS"] = device.compute_class;
  if (device.compute_limit) (*env)["GPUSLICE_COMPUTE_LIMIT"] = std::to_string(device.compute_limit);
  std::vector<std::string> entries;
  for (const auto& [name, value] : *env) {
    if (name.starts_with("GPUSLICE_")) entries.push_back(name + "=" + value);
  }
  std::vector<char*> environment;
  for (std::string& entry : entries) environment.push_back(entry.data());
  environment.push_back(nullptr);
  shim::ShimOptions options;
  return shim::ParseOptions(environment.data(), &options, error);
}

std::string TenantName(const std::string& claim_namespace, const std::string& claim_name, const std::string& uid) {
  std::string tenant = claim_namespace + "." + claim_name;
  if (tenant.size() <= 63) return tenant;
  std::string head;
  for (char c : uid) {
    if (c != '-' && head.size() < 12) head += c;
  }
  return tenant.substr(0, 50) + "-" + head;
}

}  // namespace gpuslice::dra
