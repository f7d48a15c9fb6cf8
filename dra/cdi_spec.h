// The CDI spec of a prepared claim: one file per claim in the CDI directory, one device per
// allocated device, whose container edits are the claim's environment and the two mounts a
// gpuslice tenant needs (the shim library, read-only, and the broker's state directory). The
// container runtime applies it when the kubelet passes the device's CDI ID.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "dra/driver_config.h"

namespace gpuslice::dra {

// A claim UID or share ID as the driver puts it into CDI device names and file names: 1 to 64
// letters, digits and '-', starting and ending with a letter or digit (a Kubernetes UID is a
// UUID: 36 of them). Anything else could make a CDI name the runtime refuses, or a path outside
// the CDI directory.
bool ValidCdiNamePart(std::string_view text);
inline constexpr char kCdiNamePartRule[] =
    "1 to 64 letters, digits and '-', starting and ending with a letter or digit (a UID)";

// A prepared device's CDI name: "<claim uid>-<device>", and "-<share id>" after it for a share
// of a device many claims share: every share has a CDI device, and an environment, of its own.
std::string CdiDeviceName(const std::string& claim_uid, const std::string& device, const std::string& share_id);
std::string CdiDeviceId(const std::string& claim_uid, const std::string& device,
                        const std::string& share_id);  // "<kind>=<name>"
// "<cdi dir>/gpuslice.io-claim_<claim uid>.json".
inline constexpr char kCdiSpecFilePrefix[] = "gpuslice.io-claim_";
std::string CdiSpecPath(const DriverConfig& config, const std::string& claim_uid);

nlohmann::json CdiSpecJson(const DriverConfig& config, const std::string& claim_uid, const std::string& device,
                           const std::string& share_id, const std::map<std::string, std::string>& env);

// Written to a temporary file and renamed: a runtime never reads half a spec.
Status WriteCdiSpec(const DriverConfig& config, const std::string& claim_uid, const nlohmann::json& spec);
// Absent already is success (Unprepare is idempotent).
Status RemoveCdiSpec(const DriverConfig& config, const std::string& claim_uid);

}  // namespace gpuslice::dra
