#include "ctl/plan_input.h"

#include <fcntl.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <set>
#include <sstream>

#include "common/quantity.h"
#include "common/unique_fd.h"
#include "shim/options.h"

namespace gpuslice::ctl {
namespace {

constexpr char kFields[] = "name, memory, memory_limit, compute, latency_ms, trusted, fault_tolerant, tier";
constexpr char kExample[] =
    "e.g. {name: search, memory: 20Gi, compute: 30, latency_ms: 50, trusted: true, fault_tolerant: true, tier: paid}";

// A tenant name is valid exactly when the shim accepts it as GPUSLICE_TENANT: ask the shim's parser.
bool ShimAcceptsTenant(const std::string& name) {
  std::string variable = "GPUSLICE_TENANT=" + name;
  char* environment[] = {variable.data(), nullptr};
  return shim::ParseOptions(environment).ok();
}

std::string Scalar(const YAML::Node& node) { return node.IsScalar() ? node.Scalar() : std::string(); }

bool ParseBool(const YAML::Node& node, bool* out) {
  const std::string text = Scalar(node);
  if (text == "true") *out = true;
  else if (text == "false") *out = false;
  else return false;
  return true;
}

// One tenant; an error with the reason (without the file's name).
Status ParseTenant(const YAML::Node& node, size_t index, PlanTenant* tenant) {
  const std::string where = "tenant " + std::to_string(index + 1);
  if (!node.IsMap()) return Status::InvalidArgument(where + " is not a mapping; " + kExample);
  for (const auto& field : node) {
    const std::string key = Scalar(field.first);
    static const std::set<std::string> known = {"name",       "memory",  "memory_limit",   "compute",
                                                "latency_ms", "trusted", "fault_tolerant", "tier"};
    if (!known.count(key)) {
      return Status::InvalidArgument(where + ": unknown field '" + key + "'; a tenant has " + kFields);
    }
  }
  auto bad = [&](const std::string& field, const std::string& expected) {
    return Status::InvalidArgument(where + (tenant->name.empty() ? "" : " ('" + tenant->name + "')") + ": invalid " +
                                   field + " '" + Scalar(node[field]) + "'; expected " + expected);
  };
  auto missing = [&](const std::string& field, const std::string& expected) {
    return Status::InvalidArgument(where + (tenant->name.empty() ? "" : " ('" + tenant->name + "')") + ": no " + field +
                                   "; expected " + expected + ", " + kExample);
  };
  if (!node["name"]) return missing("name", "a GPUSLICE_TENANT name");
  tenant->name = Scalar(node["name"]);
  if (!ShimAcceptsTenant(tenant->name)) {
    tenant->name.clear();
    return bad("name", "1 to 63 of A-Z a-z 0-9 . _ - (it becomes GPUSLICE_TENANT)");
  }
  if (!node["memory"]) return missing("memory", "a quantity such as 20Gi");
  const auto memory = ParseByteQuantity(Scalar(node["memory"]));
  if (!memory || *memory == 0) return bad("memory", "a quantity above 0 such as 512Mi, 20Gi or 21474836480");
  tenant->memory_bytes = *memory;
  if (node["memory_limit"]) {
    const auto limit = ParseByteQuantity(Scalar(node["memory_limit"]));
    if (!limit || *limit < *memory)
      return bad("memory_limit", "a quantity at least its memory (" + Scalar(node["memory"]) + "), such as 40Gi");
    tenant->memory_limit_bytes = *limit;
  }
  if (!node["compute"]) return missing("compute", "a percentage of one GPU, 1 to 100");
  std::string compute = Scalar(node["compute"]);
  if (!compute.empty() && compute.back() == '%') compute.pop_back();
  const auto percent = ParseUnsigned(compute);
  if (!percent || *percent < 1 || *percent > 100) return bad("compute", "a percentage of one GPU, 1 to 100");
  tenant->compute_percent = static_cast<uint32_t>(*percent);
  if (node["latency_ms"]) {
    double ms = 0;
    std::istringstream in(Scalar(node["latency_ms"]));
    if (!(in >> ms) || !in.eof() || !std::isfinite(ms) || ms <= 0 || ms > 3.6e6)
      return bad("latency_ms", "a p99 target in milliseconds above 0, such as 50 or 2.5");
    tenant->latency_ms = ms;
  }
  if (node["trusted"] && !ParseBool(node["trusted"], &tenant->trusted)) return bad("trusted", "true or false");
  if (node["fault_tolerant"] && !ParseBool(node["fault_tolerant"], &tenant->fault_tolerant))
    return bad("fault_tolerant", "true or false");
  if (node["tier"]) {
    tenant->tier = Scalar(node["tier"]);
    if (!ShimAcceptsTenant(tenant->tier)) return bad("tier", "a name of 1 to 63 of A-Z a-z 0-9 . _ -");
  }
  return Status::Ok();
}

}  // namespace

Result<std::vector<PlanTenant>> ParsePlanTenants(const std::string& text, const std::string& source) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(source + ": not YAML or JSON (line " + std::to_string(e.mark.line + 1) +
                                   "): " + e.msg);
  }
  // The document is {tenants: [...]} or the list itself.
  YAML::Node list = root;
  if (root.IsMap()) {
    for (const auto& field : root) {
      if (Scalar(field.first) != "tenants") {
        return Status::InvalidArgument(source + ": unknown key '" + Scalar(field.first) +
                                       "'; the file holds 'tenants:', a list of tenants");
      }
    }
    list = root["tenants"];
  }
  if (!list.IsSequence() || list.size() == 0) {
    return Status::InvalidArgument(source + ": no tenants; expected 'tenants:' and a list of them, " + kExample);
  }
  std::vector<PlanTenant> parsed(list.size());
  std::set<std::string> names;
  for (size_t i = 0; i < list.size(); ++i) {
    if (const Status tenant = ParseTenant(list[i], i, &parsed[i]); !tenant.ok()) {
      return Status::InvalidArgument(source + ": " + tenant.message());
    }
    if (!names.insert(parsed[i].name).second) {
      return Status::InvalidArgument(source + ": tenant " + std::to_string(i + 1) + ": the name '" + parsed[i].name +
                                     "' is used twice; each tenant needs its own (it is its GPUSLICE_TENANT)");
    }
  }
  return parsed;
}

Result<std::vector<PlanTenant>> ReadPlanTenants(const std::string& path) {
  // read(2) rather than a stream: the system's reason (missing, permission, a directory) is
  // what the operator needs, and a stream keeps it from us.
  const UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  std::string text;
  int why = fd.valid() ? 0 : errno;
  if (fd.valid()) {
    char chunk[65536];
    for (ssize_t n; (n = read(fd.get(), chunk, sizeof chunk)) != 0;) {
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        why = errno;
        break;
      }
      text.append(chunk, static_cast<size_t>(n));
    }
  }
  if (why != 0) {
    return Status::Error(path + ": cannot be read: " + std::strerror(why));
  }
  return ParsePlanTenants(text, path);
}

}  // namespace gpuslice::ctl
