// The parts of a resource.k8s.io/v1 ResourceClaim (as the API server answers a GET) that the
// driver reads, with every field's JSON type checked: a field of another type is an error naming
// its path in the claim ("status.allocation.devices.results[0].driver is 5; expected a string"),
// never an exception, whatever the answer holds. What the values mean (which device, how much of
// it) is judged later, by ReadClaimAllocation (dra/claim_allocation.h).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace gpuslice::dra {

// One entry of status.allocation.devices.results.
struct AllocatedDevice {
  std::string request;
  std::string driver;
  std::string pool;
  std::string device;
  std::string share_id;                                // shareID; empty when the device was allocated whole
  bool has_consumed = false;                           // consumedCapacity is present
  nlohmann::json consumed = nlohmann::json::object();  // consumedCapacity: an object (name -> quantity)
};

// One entry of status.allocation.devices.config that carries an opaque configuration.
struct AllocatedConfig {
  std::string source;                 // FromClass or FromClaim
  std::vector<std::string> requests;  // empty: every request of the claim
  std::string driver;                 // opaque.driver
  nlohmann::json parameters;          // opaque.parameters, as written (null when absent)
};

struct ResourceClaim {
  std::string claim_namespace;  // metadata.namespace
  std::string name;             // metadata.name
  std::string uid;              // metadata.uid
  bool allocated = false;       // status.allocation.devices is present
  std::vector<AllocatedDevice> results;
  std::vector<AllocatedConfig> configs;
};

// The claim, or an InvalidArgument error with one line naming the field and what it should be.
Result<ResourceClaim> ParseResourceClaim(const nlohmann::json& claim);

// A value of the claim as an error shows it: JSON, ASCII only, at most 80 characters (a field may
// hold megabytes, or a newline).
std::string ShownInError(const nlohmann::json& value);

}  // namespace gpuslice::dra
