// Where the Kubernetes API server is and how to authenticate to it: in a pod, the service
// account's token and CA (KUBERNETES_SERVICE_HOST/PORT, /var/run/secrets/kubernetes.io/
// serviceaccount); for development, a kubeconfig's current context (a server, a CA file or
// insecure-skip-tls-verify, a bearer token or token file; client certificates and exec plugins
// are not supported and are refused by name).
#pragma once

#include <string>

#include "common/status.h"

namespace gpuslice::dra {

struct ApiServer {
  std::string url;      // "https://10.96.0.1:443" or "http://127.0.0.1:8080"
  std::string token;    // bearer token; empty: none
  std::string ca_file;  // PEM bundle to verify the server with; empty: the system's
  bool insecure = false;
};

// Each an InvalidArgument error with one line when the server or the credentials cannot be found.
Result<ApiServer> InClusterApiServer(const std::string& service_account_dir);
Result<ApiServer> KubeconfigApiServer(const std::string& path);

}  // namespace gpuslice::dra
