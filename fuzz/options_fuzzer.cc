// libFuzzer target: the shim's whole option parsing (shim/options.h ParseOptions) over an
// environment made of the input, one "NAME=value" per line (the seed corpus and options.dict
// steer it to the GPUSLICE_* names). Any environment is accepted or refused, never crashes or
// hangs; a refusal comes with a message that says it is gpuslice's, and an accepted one never
// holds a value outside what the options allow, nor a name meant for gpuslice spelt otherwise
// than exactly (no tenant runs unlimited because of a typo, whatever its case or underscores).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "shim/options.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> entries;
  std::string current;
  for (size_t i = 0; i < size; ++i) {
    const char c = static_cast<char>(data[i]);
    if (c == '\n' || c == '\0') {
      entries.push_back(current);
      current.clear();
    } else {
      current += c;
    }
  }
  entries.push_back(current);
  std::vector<char*> environment;
  for (std::string& entry : entries) environment.push_back(entry.data());
  environment.push_back(nullptr);

  const gpuslice::Result<gpuslice::shim::ShimOptions> parsed = gpuslice::shim::ParseOptions(environment.data());
  if (!parsed.ok()) {
    if (parsed.message().rfind("gpuslice: ", 0) != 0) std::abort();
    return 0;
  }
  if (!parsed.message().empty()) std::abort();
  // Accepted: every name meant for gpuslice was spelt exactly (GPU_SLICE_*, another case: refused).
  for (const std::string& entry : entries) {
    const std::string name = entry.substr(0, entry.find('='));
    if (entry.find('=') == std::string::npos || gpuslice::shim::IsSimulatorVariable(name)) continue;
    const auto spelling = gpuslice::shim::GpusliceSpelling(name);
    if (spelling && *spelling != name) std::abort();
  }
  const gpuslice::shim::ShimOptions& options = parsed.value();
  if (options.compute_limit_pct < 1 || options.compute_limit_pct > 100) std::abort();
  if (options.compute_request_pct > options.compute_limit_pct) std::abort();
  if (options.state_dir.empty() || options.state_dir[0] != '/') std::abort();
  if (options.tenant.size() > 63) std::abort();
  for (const auto& [ordinal, limit] : options.memory_limit_per_ordinal) {
    if (ordinal < 0 || ordinal > 63 || (limit.bytes == 0 && limit.percent == 0)) std::abort();
  }
  if (options.memory_limit && options.memory_limit->bytes == 0 && options.memory_limit->percent == 0) std::abort();
  return 0;
}
