// The CDI spec of a prepared claim: one file per claim in the CDI directory, one device per
// allocated device, whose container edits are the claim's environment and the two mounts a
// gpuslice tenant needs (the shim library, read-only, and the broker's state directory). The
// container runtime applies it when the kubelet passes the device's CDI ID.
#pragma once

#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "dra/driver_config.h"

namespace gpuslice::dra {

// A prepared device's CDI name: "<claim uid>-<device>", and "-<share id>" after it for a share
// of a device many claims share: every share has a CDI device, and an environment, of its own.
std::string CdiDeviceName(const std::string& claim_uid, const std::string& device, const std::string& share_id);
std::string CdiDeviceId(const std::string& claim_uid, const std::string& device,
                        const std::string& share_id);  // "<kind>=<name>"
std::string CdiSpecPath(const DriverConfig& config, const std::string& claim_uid);

nlohmann::json CdiSpecJson(const DriverConfig& config, const std::string& claim_uid, const std::string& device,
                           const std::string& share_id, const std::map<std::string, std::string>& env);

// Written to a temporary file and renamed: a runtime never reads half a spec.
Status WriteCdiSpec(const DriverConfig& config, const std::string& claim_uid, const nlohmann::json& spec);
// Absent already is success (Unprepare is idempotent).
Status RemoveCdiSpec(const DriverConfig& config, const std::string& claim_uid);

}  // namespace gpuslice::dra
