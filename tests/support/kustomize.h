// Rendering deploy/kubernetes/'s kustomizations in tests: with tests/support/kustomize_render.py
// (the subset of kustomize the tree uses; kubectl is not a Debian package) and, where kubectl is
// installed, with `kubectl kustomize` itself, the reference the renderer is checked against.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace gpuslice::testing {

// The objects `dir` renders to (a JSON list, kustomize's order); nullopt with the renderer's
// line in *error.
std::optional<nlohmann::json> RenderKustomization(const std::string& dir, std::string* error);

// The same through `kubectl kustomize`; nullopt when kubectl is not on PATH (*error empty) or
// refuses the directory (*error its message).
std::optional<nlohmann::json> KubectlKustomize(const std::string& dir, std::string* error);

// Every object of `objects` of `kind`, in order.
nlohmann::json ObjectsOfKind(const nlohmann::json& objects, const std::string& kind);

}  // namespace gpuslice::testing
