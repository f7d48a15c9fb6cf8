#include "dra/api_server.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

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

bool InClusterApiServer(const std::string& service_account_dir, ApiServer* out, std::string* error) {
  const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
  const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
  if (!host || !port) {
    *error = "gpuslice-dra-driver: not in a pod (no KUBERNETES_SERVICE_HOST/PORT) and no --kubeconfig or --api-server given";
    return false;
  }
  const std::string h = host;
  out->url = "https://" + (h.find(':') != std::string::npos ? "[" + h + "]" : h) + ":" + port;
  if (!ReadFile(service_account_dir + "/token", &out->token)) {
    *error = "gpuslice-dra-driver: cannot read the service account token " + service_account_dir + "/token";
    return false;
  }
  out->ca_file = service_account_dir + "/ca.crt";
  return true;
}

bool KubeconfigApiServer(const std::string& path, ApiServer* out, std::string* error) {
  try {
    const YAML::Node config = YAML::LoadFile(path);
    const std::string context_name = config["current-context"] ? config["current-context"].as<std::string>() : "";
    const YAML::Node context = Named(config["contexts"], context_name, "context");
    if (!context) {
      *error = "gpuslice-dra-driver: kubeconfig " + path + ": no context named '" + context_name + "' (current-context)";
      return false;
    }
    const YAML::Node cluster = Named(config["clusters"], context["cluster"].as<std::string>(""), "cluster");
    if (!cluster || !cluster["server"]) {
      *error = "gpuslice-dra-driver: kubeconfig " + path + ": the current context's cluster has no server";
      return false;
    }
    out->url = cluster["server"].as<std::string>();
    while (!out->url.empty() && out->url.back() == '/') out->url.pop_back();
    out->ca_file = cluster["certificate-authority"].as<std::string>("");
    out->insecure = cluster["insecure-skip-tls-verify"].as<bool>(false);
    if (cluster["certificate-authority-data"]) {
      *error = "gpuslice-dra-driver: kubeconfig " + path +
               ": certificate-authority-data is not supported; name a file with certificate-authority";
      return false;
    }
    const YAML::Node user = Named(config["users"], context["user"].as<std::string>(""), "user");
    if (user) {
      for (const char* unsupported : {"client-certificate", "client-certificate-data", "exec", "auth-provider"}) {
        if (user[unsupported]) {
          *error = "gpuslice-dra-driver: kubeconfig " + path + ": user credential '" + unsupported +
                   "' is not supported; use token or tokenFile";
          return false;
        }
      }
      out->token = user["token"].as<std::string>("");
      if (user["tokenFile"] && !ReadFile(user["tokenFile"].as<std::string>(), &out->token)) {
        *error = "gpuslice-dra-driver: kubeconfig " + path + ": cannot read tokenFile " + user["tokenFile"].as<std::string>();
        return false;
      }
    }
  } catch (const YAML::Exception& e) {
    *error = "gpuslice-dra-driver: cannot read kubeconfig " + path + ": " + e.what();
    return false;
  }
  return true;
}

}  // namespace gpuslice::dra
