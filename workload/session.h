// What every kind shares: the loaded driver table, the chosen device's primary context (the one
// the CUDA runtime would use) and the JSON-lines output.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "workload/driver_table.h"
#include "workload/options.h"

namespace gpuslice::workload {

using Json = nlohmann::ordered_json;

class Session {
 public:
  Session(std::string kind, const CommonOptions& options) : kind_(std::move(kind)), options_(options) {}
  ~Session();  // releases the primary context (never at static destruction: the driver may be gone)
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Loads the driver, initialises it, makes the device's primary context current and, with
  // --ready-line, prints the ready line. Returns kExitOk or the exit code to end with, after one
  // line on stderr.
  int Open();

  const DriverTable& driver() const { return driver_; }
  CUdevice device() const { return device_; }
  const CommonOptions& options() const { return options_; }

  // True for CUDA_SUCCESS; otherwise prints "gpuslice-workload: <call> failed: <CUresult name>"
  // on stderr and returns false.
  bool Check(CUresult result, const char* call) const;

  // Prints {"event":<event>,"kind":<kind>,["label":...,] <fields...>} as one line and flushes.
  void Emit(const char* event, const Json& fields) const;

 private:
  std::string kind_;
  CommonOptions options_;
  DriverTable driver_;
  CUdevice device_ = 0;
  bool context_retained_ = false;
};

// Prints one "gpuslice-workload: <message>" line on stderr.
void ReportError(const std::string& message);

}  // namespace gpuslice::workload

// Calls a driver entry point through the session's table and checks it, naming the call in the
// error: `if (!DRIVER_CALL(s, cuStreamCreate, &stream, 0)) return kExitDriverFailed;`
#define DRIVER_CALL(session, entry, ...) (session).Check((session).driver().entry(__VA_ARGS__), #entry)
