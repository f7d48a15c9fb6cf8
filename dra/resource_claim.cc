#include "dra/resource_claim.h"

#include <fmt/format.h>

namespace gpuslice::dra {
namespace {

using nlohmann::json;

// "status.allocation" and "devices": "status.allocation.devices".
std::string Join(const std::string& path, const std::string& key) {
  return path.empty() ? key : fmt::format("{}.{}", path, key);
}

Status WrongType(const std::string& path, const json& value, const char* expected) {
  return Status::InvalidArgument(fmt::format("{} is {}; expected {}", path, ShownInError(value), expected));
}

// The member `key` of `object` (an object), or nullptr when it is absent or null: the API server
// leaves empty fields out, and null means the same.
const json* Member(const json& object, const char* key) {
  const auto it = object.find(key);
  return it == object.end() || it->is_null() ? nullptr : &*it;
}

// A string member: empty when absent.
Status ReadString(const json& object, const char* key, const std::string& path, std::string* out) {
  const json* value = Member(object, key);
  if (!value) return Status::Ok();
  if (!value->is_string()) return WrongType(Join(path, key), *value, "a string");
  *out = value->get_ref<const std::string&>();
  return Status::Ok();
}

// A member that must be an object when present: nullptr when absent.
Result<const json*> ReadObject(const json& object, const char* key, const std::string& path) {
  const json* value = Member(object, key);
  if (value && !value->is_object()) return WrongType(Join(path, key), *value, "an object");
  return value;
}

// A member that must be an array when present: nullptr when absent.
Result<const json*> ReadArray(const json& object, const char* key, const std::string& path) {
  const json* value = Member(object, key);
  if (value && !value->is_array()) return WrongType(Join(path, key), *value, "a list");
  return value;
}

// The member list `key` of `object` (absent: empty), each entry read by `read` into *out.
template <typename T>
Status ReadList(const json& object, const char* key, const std::string& path,
                Result<T> (*read)(const json& entry, const std::string& path), std::vector<T>* out) {
  const Result<const json*> list = ReadArray(object, key, path);
  if (!list.ok()) return list.status();
  for (size_t i = 0; *list && i < (*list)->size(); ++i) {
    Result<T> entry = read((**list)[i], fmt::format("{}.{}[{}]", path, key, i));
    if (!entry.ok()) return std::move(entry).status();
    out->push_back(std::move(entry).value());
  }
  return Status::Ok();
}

Result<AllocatedDevice> ReadResult(const json& entry, const std::string& path) {
  if (!entry.is_object()) return WrongType(path, entry, "an object");
  AllocatedDevice out;
  for (const auto& [key, field] :
       {std::pair{"request", &out.request}, std::pair{"driver", &out.driver}, std::pair{"pool", &out.pool},
        std::pair{"device", &out.device}, std::pair{"shareID", &out.share_id}}) {
    if (Status read = ReadString(entry, key, path, field); !read.ok()) return read;
  }
  if (const json* consumed = Member(entry, "consumedCapacity")) {
    if (!consumed->is_object()) {
      return WrongType(Join(path, "consumedCapacity"), *consumed, "an object of capacity names and quantities");
    }
    out.has_consumed = true;
    out.consumed = *consumed;
  }
  return out;
}

Result<AllocatedConfig> ReadConfig(const json& entry, const std::string& path) {
  if (!entry.is_object()) return WrongType(path, entry, "an object");
  AllocatedConfig out;
  if (Status read = ReadString(entry, "source", path, &out.source); !read.ok()) return read;
  const Result<const json*> requests = ReadArray(entry, "requests", path);
  if (!requests.ok()) return requests.status();
  if (*requests) {
    for (size_t i = 0; i < (*requests)->size(); ++i) {
      const json& request = (**requests)[i];
      if (!request.is_string()) {
        return WrongType(fmt::format("{}.requests[{}]", path, i), request, "a request's name");
      }
      out.requests.push_back(request.get<std::string>());
    }
  }
  const Result<const json*> opaque = ReadObject(entry, "opaque", path);
  if (!opaque.ok()) return opaque.status();
  if (*opaque) {
    if (Status read = ReadString(**opaque, "driver", Join(path, "opaque"), &out.driver); !read.ok()) return read;
    if (const json* parameters = Member(**opaque, "parameters")) out.parameters = *parameters;
  }
  return out;
}

// status.allocation.devices: results and configs; `claim.allocated` stays false when it is absent.
Status ReadAllocation(const json& answer, ResourceClaim* claim) {
  const json* at = &answer;
  std::string path;
  for (const char* key : {"status", "allocation", "devices"}) {
    const Result<const json*> next = ReadObject(*at, key, path);
    if (!next.ok()) return next.status();
    if (!*next) return Status::Ok();
    at = *next;
    path = Join(path, key);
  }
  claim->allocated = true;
  if (Status read = ReadList(*at, "results", path, ReadResult, &claim->results); !read.ok()) return read;
  return ReadList(*at, "config", path, ReadConfig, &claim->configs);
}

}  // namespace

std::string ShownInError(const json& value) {
  std::string text = value.dump(-1, ' ', true, json::error_handler_t::replace);
  if (text.size() > 80) text = fmt::format("{}...", text.substr(0, 77));
  return text;
}

Result<ResourceClaim> ParseResourceClaim(const json& answer) {
  if (!answer.is_object()) return WrongType("the API server's answer", answer, "a ResourceClaim object");
  ResourceClaim claim;
  const Result<const json*> metadata = ReadObject(answer, "metadata", "");
  if (!metadata.ok()) return metadata.status();
  if (*metadata) {
    for (const auto& [key, field] : {std::pair{"namespace", &claim.claim_namespace}, std::pair{"name", &claim.name},
                                     std::pair{"uid", &claim.uid}}) {
      if (Status read = ReadString(**metadata, key, "metadata", field); !read.ok()) return read;
    }
  }
  if (Status read = ReadAllocation(answer, &claim); !read.ok()) return read;
  return claim;
}

}  // namespace gpuslice::dra
