#include "tests/support/kustomize.h"

#include <unistd.h>

#include "tests/support/subprocess.h"
#include "tests/support/test_env.h"

namespace gpuslice::testing {

std::optional<nlohmann::json> RenderKustomization(const std::string& dir, std::string* error) {
  const ProcessResult r = Run({"/usr/bin/env", "python3", SourceDir() + "/tests/support/kustomize_render.py", dir});
  if (r.exit_code != 0) {
    *error = r.err.empty() ? "kustomize_render.py exited " + std::to_string(r.exit_code) : r.err;
    return std::nullopt;
  }
  return nlohmann::json::parse(r.out);
}

std::optional<nlohmann::json> KubectlKustomize(const std::string& dir, std::string* error) {
  error->clear();
  if (Run({"/bin/sh", "-c", "command -v kubectl"}).exit_code != 0) return std::nullopt;
  // kubectl prints YAML documents; python3-yaml turns them into the renderer's JSON form.
  const ProcessResult r = Run({"/bin/sh", "-c",
                               "kubectl kustomize \"$1\" | python3 -c 'import json, sys, yaml; "
                               "print(json.dumps([d for d in yaml.safe_load_all(sys.stdin) if d is not None]))'",
                               "sh", dir});
  if (r.exit_code != 0 || r.out.empty()) {
    *error = r.err.empty() ? "kubectl kustomize failed" : r.err;
    return std::nullopt;
  }
  const nlohmann::json objects = nlohmann::json::parse(r.out);
  if (objects.empty()) {  // kubectl failed and the pipe's status is python's
    *error = r.err.empty() ? "kubectl kustomize rendered nothing" : r.err;
    return std::nullopt;
  }
  return objects;
}

nlohmann::json ObjectsOfKind(const nlohmann::json& objects, const std::string& kind) {
  nlohmann::json found = nlohmann::json::array();
  for (const auto& o : objects) {
    if (o.value("kind", "") == kind) found.push_back(o);
  }
  return found;
}

}  // namespace gpuslice::testing
