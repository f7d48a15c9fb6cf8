// Variables meant for gpuslice that it would never read: GPU_SLICE_MEMORY_LIMIT=4Gi or
// gpuslice_memory_limit=4Gi would otherwise mean "no limit" without a word. They are warned
// about rather than refused: a name outside the GPUSLICE_ prefix may belong to another program,
// so the process runs on as it would without the shim's knowledge of them.
#include <string>
#include <string_view>
#include <vector>

#include "common/quantity.h"
#include "shim/options.h"

namespace gpuslice::shim {
namespace {

constexpr std::string_view kPrefix = "GPUSLICE_";
constexpr std::string_view kSplitPrefix = "GPU_SLICE_";

std::string Upper(std::string_view text) {
  std::string upper(text);
  for (char& c : upper)
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  return upper;
}

// The GPUSLICE_* spelling of a near-miss name, or "" when `name` is not one: GPUSLICE_ in another
// case, or GPU_SLICE_ in any case. A name already spelt GPUSLICE_ is the parser's to judge.
std::string Canonical(std::string_view name) {
  if (name.starts_with(kPrefix)) return "";
  const std::string upper = Upper(name);
  if (upper.starts_with(kPrefix)) return upper;
  if (upper.starts_with(kSplitPrefix)) return std::string(kPrefix) + upper.substr(kSplitPrefix.size());
  return "";
}

// The option `canonical` names (itself, per-ordinal ones included), else the nearest one.
std::string Meant(const std::string& canonical) {
  if (canonical.starts_with("GPUSLICE_SIM_")) return canonical;  // the simulated driver's
  for (const auto& spec : OptionTable()) {
    const std::string_view declared(spec.name);
    if (canonical == declared) return canonical;
    if (declared.ends_with("<n>")) {
      const std::string_view prefix = declared.substr(0, declared.size() - 3);
      if (canonical.starts_with(prefix) && ParseUnsigned(std::string_view(canonical).substr(prefix.size())))
        return canonical;
    }
  }
  return SuggestOption(canonical);
}

}  // namespace

std::vector<std::string> NearMissWarnings(char** environment) {
  std::vector<std::string> warnings;
  for (char** entry = environment; entry && *entry; ++entry) {
    const std::string_view item(*entry);
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos) continue;
    const std::string_view name = item.substr(0, eq);
    const std::string_view value = item.substr(eq + 1);
    const std::string canonical = Canonical(name);
    if (canonical.empty()) continue;
    const std::string meant = Meant(canonical);
    std::string line = "gpuslice: warning: " + std::string(name) + "='" + std::string(value) +
                       "' is not read: gpuslice reads only upper-case GPUSLICE_* variables";
    line += meant.empty() ? " (gpuslicectl options lists them)"
                          : "; did you mean " + meant + "='" + std::string(value) + "'?";
    warnings.push_back(std::move(line));
  }
  return warnings;
}

}  // namespace gpuslice::shim
