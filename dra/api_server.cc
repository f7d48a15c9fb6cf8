#include "dra/api_server.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

namespace gpuslice::dra {
namespace {

bool ReadFile(const std::string& path, std::string* text) {
  std::ifstream in(path);
  if (!in) return false;
  std::stringstream s;
  s << in.rdbuf();
  *text = s.str();
  while (!text->empty() && (text->back() == '\n' || text->back() == ' ')) text->pop_back();
  return true;
}

YAML::Node Named(const YAML::Node& list, const std::string& name, const char* field) {
  for (const auto& entry : list) {
    if (entry["name"] && entry["name"].as<std::string>() == name) return entry[field];
  }
  return YAML::Node();
}

}  // namespace

Result<ApiServer> InClusterApiServer(const std::string& service_account_dir) {
  ApiServer server;
  const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
  const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
  if (!host || !port) {
    return Status::InvalidArgument(
        "gpuslice-dra-driver: not in a pod (no KUBERNETES_SERVICE_HOST/PORT) and no --kubeconfig or --api-server given");
  }
  const std::string h = host;  // an IPv6 address goes in brackets
  server.url = fmt::format("https://{}:{}", h.find(':') != std::string::npos ? fmt::format("[{}]", h) : h, port);
  if (!ReadFile(fmt::format("{}/token", service_account_dir), &server.token)) {
    return Status::InvalidArgument(
        fmt::format("gpuslice-dra-driver: cannot read the service account token {}/token", service_account_dir));
  }
  server.ca_file = fmt::format("{}/ca.crt", service_account_dir);
  return server;
}

Result<ApiServer> KubeconfigApiServer(const std::string& path) {
  ApiServer server;
  try {
    const YAML::Node config = YAML::LoadFile(path);
    const std::string context_name = config["current-context"] ? config["current-context"].as<std::string>() : "";
    const YAML::Node context = Named(config["contexts"], context_name, "context");
    if (!context) {
      return Status::InvalidArgument(
          fmt::format("gpuslice-dra-driver: kubeconfig {}: no context named '{}' (current-context)", path,
                      context_name));
    }
    const YAML::Node cluster = Named(config["clusters"], context["cluster"].as<std::string>(""), "cluster");
    if (!cluster || !cluster["server"]) {
      return Status::InvalidArgument(
          fmt::format("gpuslice-dra-driver: kubeconfig {}: the current context's cluster has no server", path));
    }
    server.url = cluster["server"].as<std::string>();
    while (!server.url.empty() && server.url.back() == '/') server.url.pop_back();
    server.ca_file = cluster["certificate-authority"].as<std::string>("");
    server.insecure = cluster["insecure-skip-tls-verify"].as<bool>(false);
    if (cluster["certificate-authority-data"]) {
      return Status::InvalidArgument(fmt::format(
          "gpuslice-dra-driver: kubeconfig {}: certificate-authority-data is not supported; name a file with certificate-authority",
          path));
    }
    const YAML::Node user = Named(config["users"], context["user"].as<std::string>(""), "user");
    if (user) {
      for (const char* unsupported : {"client-certificate", "client-certificate-data", "exec", "auth-provider"}) {
        if (user[unsupported]) {
          return Status::InvalidArgument(fmt::format(
              "gpuslice-dra-driver: kubeconfig {}: user credential '{}' is not supported; use token or tokenFile", path,
              unsupported));
        }
      }
      server.token = user["token"].as<std::string>("");
      if (user["tokenFile"] && !ReadFile(user["tokenFile"].as<std::string>(), &server.token)) {
        return Status::InvalidArgument(fmt::format("gpuslice-dra-driver: kubeconfig {}: cannot read tokenFile {}", path,
                                                   user["tokenFile"].as<std::string>()));
      }
    }
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(fmt::format("gpuslice-dra-driver: cannot read kubeconfig {}: {}", path, e.what()));
  }
  return server;
}

}  // namespace gpuslice::dra
