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

#include "common/status.h"
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

  // The claim, or an error with one line (not found, forbidden, unreachable).
  Result<nlohmann::json> GetResourceClaim(const std::string& claim_namespace, const std::string& name);
  // Creates the slice, or replaces it when it exists (with the resourceVersion the server has).
  Status ApplyResourceSlice(const nlohmann::json& slice);
  const std::string& url() const { return server_.url; }

 private:
  struct Reply {
    int status = 0;
    nlohmann::json body;
  };
  // The server's answer (any status but 429 and 5xx), or an Unavailable error after the last try.
  Result<Reply> Call(const std::string& method, const std::string& path, const nlohmann::json* body);
  ApiServer server_;
  Backoff backoff_;
};

}  // namespace gpuslice::dra
