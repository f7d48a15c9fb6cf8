#include "shim/option_values.h"

#include <vector>

#include "shim/options.h"

namespace gpuslice::shim {

std::string QuotaText(uint64_t bytes) {
  if (bytes % (1ULL << 30) == 0) return std::to_string(bytes >> 30) + "Gi";
  if (bytes % (1ULL << 20) == 0) return std::to_string(bytes >> 20) + "Mi";
  return std::to_string(bytes);
}

Status ShimAccepts(const std::map<std::string, std::string>& env) {
  std::vector<std::string> entries;
  for (const auto& [name, value] : env) {
    if (name.starts_with("GPUSLICE_")) entries.push_back(name + "=" + value);
  }
  std::vector<char*> environment;
  for (std::string& entry : entries) environment.push_back(entry.data());
  environment.push_back(nullptr);
  return ParseOptions(environment.data()).status();
}

}  // namespace gpuslice::shim
