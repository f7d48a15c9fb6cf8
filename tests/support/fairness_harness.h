// Running compute-sharing scenarios as real processes over the simulated GPU, and measuring them
// against its ground truth: the per-process device busy time the simulator records
// (include/gpuslice/sim_query.h). The scheduler tests' support (tests/sched_*_test.cc); the
// benchmarks of the same scenarios, with their targets, are gpuslice-bench's
// (bench/scenarios/, docs/benchmarks.md).
//
// Every process is a `gpuslice-workload`, started either unmanaged (the simulated driver alone:
// the hardware's equal time-slicing) or managed (LD_PRELOAD=libgpuslice.so as a tenant with a
// compute request and limit). Processes are grouped by their tenant label in both cases, so the
// same scenario can be measured both ways.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "broker/segment_layout.h"
#include "tests/support/subprocess.h"

namespace gpuslice::fairness {

using Json = nlohmann::json;

// Where the build put the programs.
struct Paths {
  std::string bin_dir;      // gpuslice-workload
  std::string sim_lib_dir;  // the simulated libcuda.so.1
  std::string shim_path;    // libgpuslice.so
};

// A tenant's process: a testing::Subprocess that drops every inherited GPUSLICE_* variable and
// LD_PRELOAD, then gets `env` ("NAME=value"), and reads the workload's result line.
class Child {
 public:
  Child(const std::vector<std::string>& argv, const std::vector<std::string>& env)
      : process_(argv, env, testing::Inherit::kAllButGpuslice) {}

  pid_t pid() const { return process_.pid(); }
  bool running() const { return process_.running(); }
  void Kill(int signal) { process_.Kill(signal); }
  // Exit code (-1 when killed by a signal, or when it outlived timeout_ms and was SIGKILLed).
  int Wait(int timeout_ms = 60000) { return process_.Wait(timeout_ms).exit_code; }
  // True once stdout contains `text`; false on timeout or when the child exits first.
  bool WaitForOutput(const std::string& text, int timeout_ms = 30000) {
    return process_.WaitForOutput(text, timeout_ms);
  }
  std::string Stdout() const { return process_.StdoutSoFar(); }
  std::string Stderr() const { return process_.StderrSoFar(); }
  // The workload's last {"event":"result",...} line; null when there is none.
  Json Result() const;

 private:
  testing::Subprocess process_;  // SIGKILLed by its destructor if it still runs
};

// One process's figures at a sample.
struct ProcessFigures {
  std::string tenant;
  uint64_t busy_ns = 0;
  uint64_t kernels = 0;
  bool live = false;
};

// The simulated device at one instant.
struct Sample {
  uint64_t t_ns = 0;                               // CLOCK_MONOTONIC
  uint64_t device_busy_ns = 0;                     // all processes together
  uint64_t handovers = 0;                          // the simulator's context switches
  pid_t running_pid = 0;                           // the process on the device now, 0 if none
  std::map<std::string, uint64_t> busy_by_tenant;  // the processes started through Gpu::Start
  std::map<pid_t, ProcessFigures> by_pid;
};

// Device time each tenant got between two samples.
std::map<std::string, uint64_t> BusyBetween(const Sample& a, const Sample& b);
// Each tenant's share of the device time used by all of them between two samples.
std::map<std::string, double> SharesBetween(const Sample& a, const Sample& b);
// Fraction of the wall time between two samples that `tenant` (or, empty, anyone) kept the
// device busy.
double BusyFraction(const Sample& a, const Sample& b, const std::string& tenant = "");
// Jain's fairness index (sum x)^2 / (n sum x^2): 1 when all equal, 1/n when one has everything.
double Jain(const std::vector<double>& x);

struct StartOptions {
  bool managed = true;           // under the shim
  int request_pct = 0;           // GPUSLICE_COMPUTE_REQUEST (0: not set, the shim's default)
  int limit_pct = 0;             // GPUSLICE_COMPUTE_LIMIT (0: not set)
  std::vector<std::string> env;  // more "NAME=value"
};

// One simulated GPU (a state file of its own) and one broker state directory.
class Gpu {
 public:
  // Fresh files under /dev/shm and /tmp, named after `tag`, removed by the destructor.
  Gpu(Paths paths, const std::string& tag);
  // Files that someone else owns (a test fixture's); not removed.
  Gpu(Paths paths, std::string sim_state, std::string state_dir);
  ~Gpu();  // stops every process still running
  Gpu(const Gpu&) = delete;
  Gpu& operator=(const Gpu&) = delete;

  const std::string& sim_state() const { return sim_state_; }
  const std::string& state_dir() const { return state_dir_; }

  // Starts `gpuslice-workload <args...>`; its device time counts for `tenant` (the
  // GPUSLICE_TENANT when managed, a label only when not). The Gpu owns the process.
  Child* Start(const std::string& tenant, const std::vector<std::string>& workload_args,
               const StartOptions& options = {});
  // Starts and waits for the "ready" line (--ready-line is added). nullptr on failure.
  Child* StartReady(const std::string& tenant, std::vector<std::string> workload_args, const StartOptions& options = {},
                    int timeout_ms = 30000);
  // Runs a workload to completion and returns its result line (null on failure).
  Json RunToEnd(const std::string& tenant, const std::vector<std::string>& workload_args,
                const StartOptions& options = {}, int timeout_ms = 60000);

  // The GPU's sharing mode, quantum and queued-work budget (0 = the default) in the broker, as
  // `gpuslicectl set` would set them. The GPU appears in the broker once a tenant used it: if it
  // has not, a managed process that allocates 1 MiB and exits introduces it first.
  bool SetPolicy(broker::SharingMode mode, uint64_t quantum_ns, std::string* error, uint64_t budget_ns = 0);

  // The simulated device `ordinal` now (a node of several: GPUSLICE_SIM_DEVICES in every
  // process's StartOptions::env).
  Sample Take(int ordinal = 0) const;
  // Sends SIGTERM to every running process and waits for them (the workload prints its result).
  void StopAll(int timeout_ms = 30000);

 private:
  Paths paths_;
  std::string sim_state_;
  std::string state_dir_;
  bool own_files_ = false;
  std::map<pid_t, std::string> tenant_of_;
  std::vector<std::unique_ptr<Child>> children_;
};

// Sleeps for `seconds` (a double).
void SleepFor(double seconds);
uint64_t NowNs();

// Nearest-rank percentile (q in [0, 1]) of `values`; 0 when empty.
double Percentile(std::vector<double> values, double q);

}  // namespace gpuslice::fairness
