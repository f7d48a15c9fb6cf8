#include "workload/session.h"

#include <unistd.h>

#include <cstdio>

#include "workload/exit_codes.h"

namespace gpuslice::workload {

void ReportError(const std::string& message) {
  std::fprintf(stderr, "gpuslice-workload: %s\n", message.c_str());
  std::fflush(stderr);
}

Session::~Session() {
  if (context_retained_) driver_.cuDevicePrimaryCtxRelease(device_);
}

int Session::Open() {
  std::string error;
  if (!LoadDriverTable(&driver_, &error)) {
    ReportError(error);
    return kExitUsage;
  }
  // A driver that cannot initialise (no device, a stub library) is a setup problem, not a
  // failure of the workload.
  if (const CUresult r = driver_.cuInit(0); r != CUDA_SUCCESS) {
    ReportError("cuInit failed: " + driver_.ErrorName(r) + " (no usable CUDA driver or device)");
    return kExitUsage;
  }
  if (const CUresult r = driver_.cuDeviceGet(&device_, options_.device); r != CUDA_SUCCESS) {
    ReportError("cuDeviceGet(" + std::to_string(options_.device) + ") failed: " + driver_.ErrorName(r) +
                " (no such --device)");
    return kExitUsage;
  }
  CUcontext context = nullptr;
  if (!DRIVER_CALL(*this, cuDevicePrimaryCtxRetain, &context, device_)) return kExitDriverFailed;
  context_retained_ = true;
  if (!DRIVER_CALL(*this, cuCtxSetCurrent, context)) return kExitDriverFailed;

  if (options_.ready_line) {
    char name[256] = {};
    int driver_version = 0;
    if (!DRIVER_CALL(*this, cuDeviceGetName, name, sizeof name - 1, device_)) return kExitDriverFailed;
    if (!DRIVER_CALL(*this, cuDriverGetVersion, &driver_version)) return kExitDriverFailed;
    Emit("ready", Json{{"pid", getpid()},
                       {"device", options_.device},
                       {"device_name", name},
                       {"driver_version", driver_version}});
  }
  return kExitOk;
}

bool Session::Check(CUresult result, const char* call) const {
  if (result == CUDA_SUCCESS) return true;
  ReportError(std::string(call) + " failed: " + driver_.ErrorName(result));
  return false;
}

void Session::Emit(const char* event, const Json& fields) const {
  Json line = {{"event", event}, {"kind", kind_}};
  if (!options_.label.empty()) line["label"] = options_.label;
  for (const auto& [key, value] : fields.items()) line[key] = value;
  // replace: a label that is not UTF-8 must not end the run.
  const std::string text = line.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n";
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}

}  // namespace gpuslice::workload
