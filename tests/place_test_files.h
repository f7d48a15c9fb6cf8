// Fixture files for the placement simulator's tests: small CSVs written to a temporary folder.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <string>

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

}  // namespace gpuslice::place::testing_files
