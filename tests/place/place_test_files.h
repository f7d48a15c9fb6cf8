// Fixture files for the placement simulator's tests: small CSVs written to a temporary folder.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "place/trace.h"

namespace gpuslice::place::testing_files {

inline std::string WriteFixture(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + "/place_" +
                           ::testing::UnitTest::GetInstance()->current_test_info()->name() + "_" + name;
  std::ofstream(path) << text;
  return path;
}

inline const char* kNodeHeader = "sn,cpu_milli,memory_mib,gpu,model\n";
inline const char* kPodHeader11 =
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n";
inline const char* kPodHeader5 = "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n";

// A shell command's stdout and stderr together, and its exit status.
inline std::string RunCommand(const std::string& command, int* status) {
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  std::string output;
  char buffer[4096];
  while (size_t n = fread(buffer, 1, sizeof buffer, pipe)) output.append(buffer, n);
  *status = WEXITSTATUS(pclose(pipe));
  return output;
}

#ifdef GPUSLICE_PLACE_CLI
// gpuslice-place with `arguments`.
inline std::string RunCli(const std::string& arguments, int* status) {
  return RunCommand(std::string(GPUSLICE_PLACE_CLI) + " " + arguments, status);
}
#endif

// A whole-GPU pod (2 cores, 1 GiB) with the trace's timing columns, for the replay's tests.
inline PodSpec TimedPod(const std::string& name, int num_gpu, int64_t created, int64_t deleted) {
  PodSpec pod;
  pod.name = name;
  pod.cpu_milli = 2000;
  pod.memory_mib = 1024;
  pod.num_gpu = num_gpu;
  pod.gpu_milli = num_gpu > 0 ? 1000 : 0;
  pod.creation_time = created;
  pod.deletion_time = deleted;
  return pod;
}

}  // namespace gpuslice::place::testing_files
