// The one rule for names meant for gpuslice. A variable is gpuslice's when its name, upper-cased
// and with GPU_SLICE_ read as GPUSLICE_, begins GPUSLICE_: GPUSLICE_MEMORY_LIMT, GPU_SLICE_MEMORY_LIMIT
// and gpuslice_memory_limit alike. Such a variable must be spelt exactly as one of the declared
// options (or, for the simulated driver, GPUSLICE_SIM_*); any other is refused with one line
// naming it and the option it most likely meant. A misspelling must never mean "no limit", and
// two spellings of one mistake must not get two answers (one was refused, the other warned about
// and run unlimited).
#include <string>
#include <string_view>

#include "common/quantity.h"
#include "shim/options.h"

namespace gpuslice::shim {
namespace {

constexpr std::string_view kPrefix = "GPUSLICE_";
constexpr std::string_view kSplitPrefix = "GPU_SLICE_";
constexpr std::string_view kSimulatorPrefix = "GPUSLICE_SIM_";

std::string Upper(std::string_view text) {
  std::string upper(text);
  for (char& c : upper)
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  return upper;
}

}  // namespace

std::optional<std::string> GpusliceSpelling(std::string_view name) {
  const std::string upper = Upper(name);
  if (upper.starts_with(kPrefix)) return upper;
  if (upper.starts_with(kSplitPrefix)) return std::string(kPrefix) + upper.substr(kSplitPrefix.size());
  return std::nullopt;
}

bool IsSimulatorVariable(std::string_view name) { return name.starts_with(kSimulatorPrefix); }

std::string LikelyOption(const std::string& spelling) {
  if (spelling.starts_with(kSimulatorPrefix)) return spelling;  // the simulated driver's
  for (const auto& spec : OptionTable()) {
    const std::string_view declared(spec.name);
    if (spelling == declared) return spelling;
    if (declared.ends_with("<n>")) {
      const std::string_view prefix = declared.substr(0, declared.size() - 3);
      if (spelling.starts_with(prefix) && ParseUnsigned(std::string_view(spelling).substr(prefix.size())))
        return spelling;
    }
  }
  return SuggestOption(spelling);
}

}  // namespace gpuslice::shim
