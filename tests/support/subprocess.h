// Running real child processes (the simulated driver's tenants) from tests.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace gpuslice::testing {

struct ProcessResult {
  int exit_code = -1;    // -1 when killed by a signal
  int signal = 0;
  std::string out;       // stdout
  std::string err;       // stderr
};

// A child started with fork+exec; stdout and stderr are captured to temporary files.
class Subprocess {
 public:
  // argv[0] is a path; `env` entries ("NAME=value") are added to the inherited environment.
  Subprocess(std::vector<std::string> argv, std::vector<std::string> env = {});
  ~Subprocess();  // kills the child if it is still running
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  pid_t pid() const { return pid_; }
  void Kill(int signal);
  // Waits at most timeout_ms (then kills it with SIGKILL and reports that).
  ProcessResult Wait(int timeout_ms = 120000);
  // The stdout written so far (for children that report before they exit).
  std::string StdoutSoFar() const;
  // Waits until stdout contains `text`; false on timeout or if the child exits first.
  bool WaitForOutput(const std::string& text, int timeout_ms = 30000);

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
  ProcessResult result_;
  std::string out_path_;
  std::string err_path_;
};

// Runs a command to completion.
ProcessResult Run(std::vector<std::string> argv, std::vector<std::string> env = {}, int timeout_ms = 120000);

}  // namespace gpuslice::testing
