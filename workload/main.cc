// gpuslice-workload: driver-API workloads for tests, benchmarks and demos. They reach the
// driver the way the CUDA runtime does (driver_table.h), so they run unchanged on the simulated
// driver, on a real GPU, and under gpuslice. Output: JSON lines on stdout, ending with one
// {"event":"result"} line; errors: one line on stderr; exit codes in exit_codes.h.
#include "workload/command_line.h"
#include "workload/exit_codes.h"
#include "workload/kinds.h"
#include "workload/stop_signal.h"

int main(int argc, char** argv) {
  using namespace gpuslice::workload;
  Invocation run;
  if (const auto exit_code = ParseCommandLine(argc, argv, &run)) return *exit_code;
  InstallStopHandlers();
  switch (run.kind) {
    case Kind::kCompute: return RunCompute(run.common, run.compute);
    case Kind::kLatency: return RunLatency(run.common, run.latency);
    case Kind::kMemory: return RunMemory(run.common, run.memory);
    case Kind::kSteps: return RunSteps(run.common, run.steps);
  }
  return kExitUsage;
}
