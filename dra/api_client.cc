#include "dra/api_client.h"

#include <thread>

#include <fmt/format.h>
#include <httplib.h>

namespace gpuslice::dra {
namespace {

constexpr char kSlices[] = "/apis/resource.k8s.io/v1/resourceslices";

// The server's Status message, or the body's start.
std::string Message(const nlohmann::json& body, const std::string& raw) {
  if (body.is_object() && body.contains("message")) return body["message"].get<std::string>();
  return raw.substr(0, 200);
}

// httplib names its errors ("Connection", "SSLServerVerification"); a user needs the cause.
std::string Cause(httplib::Error error, const ApiServer& server) {
  switch (error) {
    case httplib::Error::Connection: return "cannot connect (Connection)";
    case httplib::Error::SSLServerVerification:
      return fmt::format("its certificate is not vouched for by {} (SSLServerVerification)",
                         server.ca_file.empty() ? std::string("the system's CAs") : server.ca_file);
    case httplib::Error::SSLConnection: return "the TLS handshake failed (SSLConnection)";
    case httplib::Error::Read: return "the connection broke while reading (Read)";
    default: return httplib::to_string(error);
  }
}

}  // namespace

ApiClient::ApiClient(ApiServer server, Backoff backoff) : server_(std::move(server)), backoff_(backoff) {}
ApiClient::~ApiClient() = default;

Result<ApiClient::Reply> ApiClient::Call(const std::string& method, const std::string& path,
                                         const nlohmann::json* body) {
  auto delay = backoff_.first;
  std::string last;
  for (int attempt = 1; attempt <= backoff_.tries; ++attempt) {
    // A client per call: a connection the server closed is not reused, and a failed TLS
    // handshake leaves nothing behind.
    httplib::Client client(server_.url);
    client.set_connection_timeout(std::chrono::seconds(5));
    client.set_read_timeout(std::chrono::seconds(20));
    if (!server_.token.empty()) client.set_bearer_token_auth(server_.token.c_str());
    if (!server_.ca_file.empty()) client.set_ca_cert_path(server_.ca_file.c_str());
    client.enable_server_certificate_verification(!server_.insecure);
    httplib::Headers headers = {{"Accept", "application/json"}};
    auto send = [&]() -> httplib::Result {
      if (method == "GET") return client.Get(path.c_str(), headers);
      if (method == "POST") return client.Post(path.c_str(), headers, body->dump(), "application/json");
      return client.Put(path.c_str(), headers, body->dump(), "application/json");
    };
    const httplib::Result result = send();
    if (result) {
      Reply reply{result->status, nlohmann::json::parse(result->body, nullptr, false)};
      if (result->status != 429 && result->status < 500) return reply;
      last = fmt::format("HTTP {} {}", result->status, Message(reply.body, result->body));
    } else {
      last = Cause(result.error(), server_);
    }
    if (attempt < backoff_.tries) {
      std::this_thread::sleep_for(delay);
      delay *= 2;
    }
  }
  return Status::Unavailable(
      fmt::format("gpuslice-dra-driver: the API server at {} did not answer {} {} after {} tries: {}", server_.url,
                  method, path, backoff_.tries, last));
}

Result<nlohmann::json> ApiClient::GetResourceClaim(const std::string& claim_namespace, const std::string& name) {
  const std::string path =
      fmt::format("/apis/resource.k8s.io/v1/namespaces/{}/resourceclaims/{}", claim_namespace, name);
  Result<Reply> reply = Call("GET", path, nullptr);
  if (!reply.ok()) return std::move(reply).status();
  if (reply->status != 200) {
    return Status::Error(fmt::format("gpuslice-dra-driver: cannot read claim {}/{}: HTTP {} {}", claim_namespace, name,
                                     reply->status, Message(reply->body, "")));
  }
  return std::move(reply->body);
}

Status ApiClient::ApplyResourceSlice(const nlohmann::json& slice) {
  const std::string name = slice["metadata"]["name"];
  Result<Reply> reply = Call("POST", kSlices, &slice);
  if (!reply.ok()) return std::move(reply).status();
  if (reply->status == 201 || reply->status == 200) return Status::Ok();
  if (reply->status == 409) {  // exists: replace it, naming the version replaced
    const std::string path = fmt::format("{}/{}", kSlices, name);
    reply = Call("GET", path, nullptr);
    if (!reply.ok()) return std::move(reply).status();
    if (reply->status == 200) {
      nlohmann::json replacement = slice;
      replacement["metadata"]["resourceVersion"] = reply->body["metadata"].value("resourceVersion", "");
      reply = Call("PUT", path, &replacement);
      if (!reply.ok()) return std::move(reply).status();
      if (reply->status == 200) return Status::Ok();
    }
  }
  return Status::Error(fmt::format("gpuslice-dra-driver: the API server refused ResourceSlice {}: HTTP {} {}", name,
                                   reply->status, Message(reply->body, "")));
}

}  // namespace gpuslice::dra
