// The process's one parse of its GPUSLICE_* environment (shim/options.h): the driver's loader
// needs GPUSLICE_DRIVER_LIBRARY before the shim's state exists, and a bad variable must be
// reported even when no driver can be loaded, so both read this.
#include <cstring>
#include <string>
#include <utility>

#include "shim/log.h"
#include "shim/options.h"

extern char** environ;

namespace gpuslice::shim {
namespace {

struct Parsed {
  ShimOptions options;
  bool valid = false;
};

}  // namespace

const ShimOptions& ProcessOptions(bool* valid) {
  static const Parsed* parsed = [] {
    auto* p = new Parsed();  // kept for the life of the process, forks included
    Result<ShimOptions> options = ParseOptions(environ);
    p->valid = options.ok();
    if (p->valid) {
      p->options = std::move(options).value();
    } else {
      LogError("%s", options.message().c_str() + std::strlen("gpuslice: "));
      p->options = ValidOptions(environ);
    }
    return p;
  }();
  *valid = parsed->valid;
  return parsed->options;
}

}  // namespace gpuslice::shim
