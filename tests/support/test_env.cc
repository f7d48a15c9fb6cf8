#include "tests/support/test_env.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>

extern char** environ;

namespace gpuslice::testing {

std::string SimLibDir() { return GPUSLICE_SIM_LIB_DIR; }
std::string BinDir() { return GPUSLICE_BIN_DIR; }
std::string SourceDir() { return GPUSLICE_SOURCE_DIR; }
std::string ShimPath() { return GPUSLICE_SHIM_PATH; }

void SimTest::SetUp() {
  std::vector<std::string> names;
  for (char** e = environ; *e; ++e) {
    if (std::strncmp(*e, "GPUSLICE_", 9) == 0) names.emplace_back(*e, std::strcspn(*e, "="));
  }
  for (const auto& name : names) {
    saved_.emplace_back(name, std::getenv(name.c_str()));
    unsetenv(name.c_str());
  }
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  // Parameterised tests have '/' in their names; a file name must not.
  std::string name = std::string(info->test_suite_name()) + "." + info->name();
  for (char& c : name) c = (c == '/') ? '_' : c;
  state_path_ = "/dev/shm/gpuslice-test-" + std::to_string(getpid()) + "-" + name;
  unlink(state_path_.c_str());
  setenv("GPUSLICE_SIM_STATE", state_path_.c_str(), 1);
}

void SimTest::SetEnv(const std::string& name, const std::string& value) {
  if (name.rfind("GPUSLICE_", 0) != 0) {
    const char* old = std::getenv(name.c_str());
    saved_.emplace_back(name, old ? old : std::string("\x01unset"));
  }
  setenv(name.c_str(), value.c_str(), 1);
}

void SimTest::TearDown() {
  unlink(state_path_.c_str());
  std::vector<std::string> names;
  for (char** e = environ; *e; ++e) {
    if (std::strncmp(*e, "GPUSLICE_", 9) == 0) names.emplace_back(*e, std::strcspn(*e, "="));
  }
  for (const auto& name : names) unsetenv(name.c_str());
  for (const auto& [name, value] : saved_) {
    if (value == "\x01unset") unsetenv(name.c_str());
    else setenv(name.c_str(), value.c_str(), 1);
  }
  saved_.clear();
}

}  // namespace gpuslice::testing
