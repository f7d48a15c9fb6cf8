// Test isolation: each test gets its own simulated-GPU state file and environment.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace gpuslice::testing {

// Paths of the build tree, fixed at configure time.
std::string SimLibDir();  // holds the simulated libcuda.so.1 and libnvidia-ml.so.1
std::string BinDir();     // gpuslice-workload, gpuslice-sim, ...
std::string SourceDir();
std::string ShimPath();  // the preloaded interposer, libgpuslice.so

// A fixture that points GPUSLICE_SIM_STATE at a fresh file for the test (removed afterwards)
// and clears every other GPUSLICE_* variable, so that tests never see each other's devices.
// Child processes inherit the environment and so share the test's simulated GPUs.
class SimTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;

  // Sets a variable for this test and its children (restored in TearDown).
  void SetEnv(const std::string& name, const std::string& value);
  const std::string& state_path() const { return state_path_; }

 private:
  std::string state_path_;
  std::vector<std::pair<std::string, std::string>> saved_;
};

}  // namespace gpuslice::testing
