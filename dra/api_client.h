// The few calls the driver makes to the Kubernetes API server: read a ResourceClaim, and
// create or replace this node's ResourceSlice. A connection failure, 429 or 5xx is retried with
// exponential back-off (the API server restarts, a control plane upgrade); anything else is an
// answer, reported with the server's message. The error after the last try names the server
// and the cause in one line.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "dra/api_server.h"

namespace httplib {
class Client;
}

namespace gpuslice::dra {

struct Backoff {
  int tries = 5;
  std::chrono::milliseconds first{200};  // doubled after each failed try
};

class ApiClient {
 public:
  ApiClient(ApiServer server, Backoff backoff);
  ~ApiClient();

  // The claim, or false with one line in *error (not found, forbidden, unreachable).
  bool GetResourceClaim(const std::string& claim_namespace, const std::string& name, nlohmann::json* claim, std::string* error);
  // Creates the slice, or replaces it when it exists (with the resourceVersion the server has).
  bool ApplyResourceSlice(const nlohmann::json& slice, std::string* error);
  const std::string& url() const { return server_.url; }

 private:
  struct Reply {
    int status = 0;
    nlohmann::json body;
  };
  bool Call(const std::string& method, const std::string& path, const nlohmann::json* body, Reply* reply, std::string* error);
  ApiServer server_;
  Backoff backoff_;
};

}  // namespace gpuslice::dra
