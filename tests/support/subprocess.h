// Running real child processes (the simulated driver's tenants) from tests: the one child-process
// helper of the tests and of the scheduler harness (tests/support/fairness_harness.h).
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace gpuslice::testing {

struct ProcessResult {
  int exit_code = -1;  // -1 when killed by a signal
  int signal = 0;
  std::string out;  // stdout
  std::string err;  // stderr
};

// What a child inherits of this process's environment.
enum class Inherit {
  kAll,             // everything
  kAllButGpuslice,  // everything but GPUSLICE_* and LD_PRELOAD (a tenant gets only what it is given)
};

// A child started with fork+exec; stdout and stderr are captured to temporary files. Everything
// the child needs is prepared before fork (the parent may have threads).
class Subprocess {
 public:
  // argv[0] is a path; `env` entries ("NAME=value") are added to (or replace in) the inherited
  // environment.
  Subprocess(std::vector<std::string> argv, std::vector<std::string> env = {}, Inherit inherit = Inherit::kAll);
  ~Subprocess();  // kills the child if it is still running
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  pid_t pid() const { return pid_; }
  bool running() const { return !reaped_; }  // not yet reaped (by Wait or WaitForOutput)
  void Kill(int signal);
  // Waits at most timeout_ms (then kills it with SIGKILL and reports that).
  ProcessResult Wait(int timeout_ms = 120000);
  // The stdout and stderr written so far (for children that report before they exit).
  std::string StdoutSoFar() const;
  std::string StderrSoFar() const;
  // Waits until stdout contains `text`; false on timeout or if the child exits first.
  bool WaitForOutput(const std::string& text, int timeout_ms = 30000);

 private:
  pid_t pid_ = -1;
  void Reaped(int status);

  bool reaped_ = false;
  ProcessResult result_;
  std::string out_path_;
  std::string err_path_;
};

// Runs a command to completion.
ProcessResult Run(std::vector<std::string> argv, std::vector<std::string> env = {}, int timeout_ms = 120000);

}  // namespace gpuslice::testing
