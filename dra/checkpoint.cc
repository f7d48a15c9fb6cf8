#include "dra/checkpoint.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/replace_file.h"

namespace gpuslice::dra {
namespace {
constexpr int kVersion = 1;  // bump when a field changes meaning; older files are then refused
}

Result<PreparedClaims> LoadCheckpoint(const std::string& path) {
  PreparedClaims claims;
  std::ifstream in(path);
  if (!in) {
    if (errno == ENOENT) return claims;
    return Status::Error(
        fmt::format("gpuslice-dra-driver: cannot read the checkpoint {}: {}", path, std::strerror(errno)));
  }
  std::stringstream text;
  text << in.rdbuf();
  try {
    const auto doc = nlohmann::json::parse(text.str());
    if (doc.value("version", 0) != kVersion) {
      return Status::InvalidArgument(fmt::format(
          "gpuslice-dra-driver: the checkpoint {} has version {}, this driver reads version {}; unprepare its claims with the driver that wrote it",
          path, doc.value("version", nlohmann::json(0)).dump(), kVersion));
    }
    for (const auto& [uid, c] : doc.at("claims").items()) {
      PreparedClaim claim{c.at("namespace"), c.at("name"), {}};
      for (const auto& d : c.at("devices")) {
        claim.devices.push_back(
            {d.at("request"), d.at("pool"), d.at("device"), d.at("cdiDeviceIds"), d.value("shareID", "")});
      }
      claims[uid] = claim;
    }
  } catch (const nlohmann::json::exception& e) {
    return Status::InvalidArgument(
        fmt::format("gpuslice-dra-driver: the checkpoint {} is damaged: {}", path, e.what()));
  }
  return claims;
}

Status SaveCheckpoint(const std::string& path, const PreparedClaims& claims) {
  nlohmann::json doc = {{"version", kVersion}, {"claims", nlohmann::json::object()}};
  for (const auto& [uid, claim] : claims) {
    nlohmann::json devices = nlohmann::json::array();
    for (const auto& d : claim.devices) {
      nlohmann::json device = {{"request", d.request},
                               {"pool", d.pool},
                               {"device", d.device},
                               {"cdiDeviceIds", d.cdi_device_ids}};
      if (!d.share_id.empty()) device["shareID"] = d.share_id;
      devices.push_back(device);
    }
    doc["claims"][uid] = {{"namespace", claim.claim_namespace}, {"name", claim.name}, {"devices", devices}};
  }
  if (Status written = ReplaceFile(path, fmt::format("{}\n", doc.dump(2))); !written.ok()) {
    return Status::Error(
        fmt::format("gpuslice-dra-driver: cannot write the checkpoint {}: {}", path, written.message()));
  }
  return Status::Ok();
}

}  // namespace gpuslice::dra
