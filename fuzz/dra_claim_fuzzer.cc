// libFuzzer target: ResourceClaims as the API server answers them, with their opaque
// configurations, as the DRA driver's NodePrepareResources reads them (dra/resource_claim.h,
// dra/claim_allocation.h) and turns them into a container's tenant, environment and CDI device
// (dra/tenant_name.h, dra/claim_environment.h, dra/cdi_spec.h). The input is the answer's JSON
// text. Whatever it holds: no exception, no crash; a refusal is one line; and what is accepted is
// within what the claim booked on a device this node has — never more memory than the device,
// compute 1-100 and a limit not under it, the whole device only for a claim that consumes no
// capacity and is no share — with a tenant, an environment the shim accepts, and a CDI device
// name the CDI parser accepts.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <iterator>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/quantity.h"
#include "dra/cdi_spec.h"
#include "dra/claim_allocation.h"
#include "dra/claim_environment.h"
#include "dra/resource_claim.h"
#include "dra/tenant_name.h"

namespace {

using gpuslice::dra::NodeDevice;

constexpr uint64_t kGiB = 1ULL << 30;

const std::vector<NodeDevice>& Devices() {
  static const std::vector<NodeDevice> devices = [] {
    std::vector<NodeDevice> d(4);
    d[0].name = "gpu-0", d[0].gpu.uuid = "GPU-00000000-0000-0000-0000-000000000000", d[0].gpu.total_memory = 16 * kGiB;
    d[1].name = "gpu-1", d[1].gpu.uuid = "GPU-11111111-1111-1111-1111-111111111111", d[1].gpu.total_memory = 141 * kGiB;
    d[2].name = "gpu-1-mig-1", d[2].gpu.uuid = "MIG-22222222-2222-2222-2222-222222222222";
    d[2].gpu.total_memory = 71 * kGiB, d[2].gpu.mig_index = 1;
    d[3].name = "gpu-2", d[3].gpu.uuid = "GPU-33333333-3333-3333-3333-333333333333", d[3].gpu.total_memory = 80 * kGiB;
    d[3].problem = "XID 79 on GPU 2";
    return d;
  }();
  return devices;
}

const gpuslice::dra::DriverConfig& Config() {
  static const gpuslice::dra::DriverConfig config = [] {
    gpuslice::dra::DriverConfig c;
    c.node_name = "node-a";
    c.host_library = "/usr/local/lib/gpuslice/libgpuslice.so";
    c.host_state_dir = "/run/gpuslice";
    c.cdi_dir = "/var/run/cdi";
    return c;
  }();
  return config;
}

// A CDI device name as the CDI project's parser (pkg/parser ValidateDeviceName) accepts it.
bool CdiDeviceNameValid(const std::string& name) {
  const auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); };
  if (name.empty() || !alnum(name.front()) || !alnum(name.back())) return false;
  for (const char c : name) {
    if (!alnum(c) && c != '_' && c != '-' && c != '.' && c != ':') return false;
  }
  return true;
}

void Check(bool condition) {
  if (!condition) std::abort();
}

// What the answer books on the driver's device, recomputed from the JSON itself: nullopt for no
// consumedCapacity (the whole device), else the quantities it records (0 where it records none,
// or none that parses). Only for a claim the driver accepted: its fields exist and have their types.
struct Booked {
  uint64_t memory = 0;
  uint64_t compute = 0;
};
std::optional<Booked> BookedOf(const nlohmann::json& claim) {
  for (const auto& r : claim.at("status").at("allocation").at("devices").at("results")) {
    const auto driver = r.find("driver");
    if (driver == r.end() || *driver != "gpu.gpuslice.io") continue;
    const auto consumed = r.find("consumedCapacity");
    if (consumed == r.end() || consumed->is_null()) return std::nullopt;
    const auto amount = [&](const std::string& name) -> uint64_t {
      for (const std::string key : {name, "gpu.gpuslice.io/" + name}) {
        const auto it = consumed->find(key);
        if (it == consumed->end()) continue;
        const auto value = gpuslice::ParseByteQuantity(it->is_string() ? it->get<std::string>() : it->dump());
        return value.value_or(0);
      }
      return 0;
    };
    return Booked{amount("memory"), amount("compute")};
  }
  std::abort();  // accepted without a device of this driver
}

// Every node of `doc`, for a mutation to pick one.
void Nodes(nlohmann::json* doc, std::vector<nlohmann::json*>* out) {
  out->push_back(doc);
  if (doc->is_structured()) {
    for (auto& child : *doc) Nodes(&child, out);
  }
}

// Values a field of a claim may be given instead of its own: other JSON types, the driver's own
// names, quantities in every form and names that are no names.
nlohmann::json Replacement(std::minstd_rand& random, const nlohmann::json& node) {
  static const char* const kStrings[] = {"",          "1e9",    "2E9",       "1.5Gi",     "100m",
                                         "-1",        "16Gi",   "17Gi",      "0",         "gpu-0",
                                         "gpu-2",     "node-a", "node-b",    "a\nb",      "../x",
                                         "latency",   "turbo",  "FromClaim", "FromClass", "gpu.gpuslice.io",
                                         "gpu/small", "Ki"};
  switch (random() % 9) {
    case 0: return nullptr;
    case 1: return static_cast<int64_t>(random() % 200) - 50;
    case 2: return 1.5;
    case 3: return kStrings[random() % std::size(kStrings)];
    case 4: return nlohmann::json::array({node});
    case 5: return nlohmann::json::object({{"memory", node}});
    case 6: return nlohmann::json::array();
    case 7: return nlohmann::json::object();
    default: return UINT64_MAX;
  }
}

}  // namespace

// Half the mutations are structural, on the parsed claim: a node replaced by a value of another
// type or a name of the driver's, or a member removed. Byte mutations alone rarely turn "q" into
// 5 and keep the text JSON.
extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);
extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int seed) {
  std::minstd_rand random(seed);
  nlohmann::json doc = nlohmann::json::parse(data, data + size, nullptr, false);
  if (doc.is_discarded() || random() % 2) return LLVMFuzzerMutate(data, size, max_size);
  std::vector<nlohmann::json*> nodes;
  Nodes(&doc, &nodes);
  nlohmann::json* node = nodes[random() % nodes.size()];
  if (node->is_object() && !node->empty() && random() % 3 == 0) {
    auto member = node->begin();
    std::advance(member, random() % node->size());
    node->erase(member);
  } else {
    *node = Replacement(random, *node);
  }
  const std::string text = doc.dump();
  if (text.size() > max_size) return LLVMFuzzerMutate(data, size, max_size);
  std::copy(text.begin(), text.end(), data);
  return text.size();
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const nlohmann::json answer = nlohmann::json::parse(data, data + size, nullptr, false);
  if (answer.is_discarded()) return 0;
  const gpuslice::Result<gpuslice::dra::ResourceClaim> claim = gpuslice::dra::ParseResourceClaim(answer);
  if (!claim.ok()) {
    Check(!claim.message().empty() && claim.message().find('\n') == std::string::npos);
    return 0;
  }
  const gpuslice::Result<gpuslice::dra::ClaimDevice> device =
      gpuslice::dra::ReadClaimAllocation(*claim, Config(), Devices());
  if (!device.ok()) {
    Check(!device.message().empty() && device.message().find('\n') == std::string::npos);
    return 0;
  }
  // Accepted: on a healthy device of this node, within it.
  const NodeDevice* node_device = gpuslice::dra::FindDevice(Devices(), device->device);
  Check(node_device != nullptr && node_device->problem.empty() && device->pool == "node-a");
  Check(device->uuid == node_device->gpu.uuid);
  Check(device->memory >= 1 && device->memory <= node_device->gpu.total_memory);
  Check(device->compute >= 1 && device->compute <= 100);
  Check(device->compute_limit == 0 || (device->compute_limit >= device->compute && device->compute_limit <= 100));
  Check(device->request.find('/') == std::string::npos);
  // Exactly what the claim consumed, or the whole device when it consumed nothing and is no share.
  if (const std::optional<Booked> booked = BookedOf(answer)) {
    Check(device->memory == booked->memory && static_cast<uint64_t>(device->compute) == booked->compute);
  } else {
    Check(device->memory == node_device->gpu.total_memory && device->compute == 100 && device->share_id.empty());
  }
  Check(device->share_id.empty() || gpuslice::dra::ValidCdiNamePart(device->share_id));
  // Its tenant, environment and CDI device, for a claim whose UID the driver takes.
  const std::string tenant = gpuslice::dra::TenantName(claim->claim_namespace, claim->name);
  const auto env = gpuslice::dra::ClaimEnvironment(*device, Config(), tenant);
  Check(env.ok());
  if (gpuslice::dra::ValidCdiNamePart(claim->uid)) {
    Check(CdiDeviceNameValid(gpuslice::dra::CdiDeviceName(claim->uid, device->device, device->share_id)));
    (void)gpuslice::dra::CdiSpecJson(Config(), claim->uid, device->device, device->share_id, *env).dump();
  }
  return 0;
}
