#include "dra/cdi_spec.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include <fmt/format.h>

#include "common/replace_file.h"

namespace gpuslice::dra {

// 0.5.0 is the first CDI version that allows a device name starting with a digit (a UID).
constexpr char kCdiVersion[] = "0.6.0";

bool ValidCdiNamePart(std::string_view text) {
  const auto alphanumeric = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
  };
  if (text.empty() || text.size() > 64 || !alphanumeric(text.front()) || !alphanumeric(text.back())) return false;
  return std::all_of(text.begin(), text.end(), [&](char c) { return alphanumeric(c) || c == '-'; });
}

std::string CdiDeviceName(const std::string& claim_uid, const std::string& device, const std::string& share_id) {
  if (share_id.empty()) return fmt::format("{}-{}", claim_uid, device);
  return fmt::format("{}-{}-{}", claim_uid, device, share_id);
}

std::string CdiDeviceId(const std::string& claim_uid, const std::string& device, const std::string& share_id) {
  return fmt::format("{}={}", kCdiKind, CdiDeviceName(claim_uid, device, share_id));
}

std::string CdiSpecPath(const DriverConfig& config, const std::string& claim_uid) {
  return fmt::format("{}/{}{}.json", config.cdi_dir, kCdiSpecFilePrefix, claim_uid);
}

nlohmann::json CdiSpecJson(const DriverConfig& config, const std::string& claim_uid, const std::string& device,
                           const std::string& share_id, const std::map<std::string, std::string>& env) {
  nlohmann::json variables = nlohmann::json::array();
  for (const auto& [name, value] : env) variables.push_back(fmt::format("{}={}", name, value));
  nlohmann::json mounts = {
      {{"hostPath", config.host_library},
       {"containerPath", config.container_library},
       {"options", {"ro", "nosuid", "nodev", "bind"}}},
      {{"hostPath", config.host_state_dir},
       {"containerPath", config.container_state_dir},
       {"options", {"rw", "nosuid", "nodev", "bind"}}},
  };
  return {{"cdiVersion", kCdiVersion},
          {"kind", kCdiKind},
          {"devices",
           {{{"name", CdiDeviceName(claim_uid, device, share_id)},
             {"containerEdits", {{"env", variables}, {"mounts", mounts}}}}}}};
}

Status WriteCdiSpec(const DriverConfig& config, const std::string& claim_uid, const nlohmann::json& spec) {
  const std::string path = CdiSpecPath(config, claim_uid);
  if (Status written = ReplaceFile(path, fmt::format("{}\n", spec.dump(2))); !written.ok()) {
    return Status::Error(fmt::format("gpuslice-dra-driver: cannot write the CDI spec {}: {}", path, written.message()));
  }
  return Status::Ok();
}

Status RemoveCdiSpec(const DriverConfig& config, const std::string& claim_uid) {
  const std::string path = CdiSpecPath(config, claim_uid);
  if (std::remove(path.c_str()) != 0 && errno != ENOENT) {
    return Status::Error(
        fmt::format("gpuslice-dra-driver: cannot remove the CDI spec {}: {}", path, std::strerror(errno)));
  }
  return Status::Ok();
}

}  // namespace gpuslice::dra
