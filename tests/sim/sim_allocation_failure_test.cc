// The simulated driver and NVML under exhausted memory and threads answer with error codes, as a
// real driver does, never with a C++ exception across their C API (which aborts a C caller): the
// real program tests/apps/allocation_failure_app.cc, linked with -lcuda and -lnvidia-ml and with
// an injector that replaces malloc and pthread_create in its process, refuses each allocation of
// a scenario of driver and NVML calls in turn. The control: the same refusal in the program's own
// C++, with no handler, aborts it, as every entry point did before it had one.
#include <gtest/gtest.h>
#include <signal.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "tests/support/subprocess.h"
#include "tests/support/test_env.h"

namespace gpuslice::testing {
namespace {

class SimAllocationFailureTest : public SimTest {
 protected:
  void SetUp() override {
    SimTest::SetUp();
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    GTEST_SKIP() << "the injector replaces malloc, which the sanitizer's runtime owns";
#endif
    if (!std::filesystem::exists(Program())) GTEST_SKIP() << Program() << " is not built";
  }
  static std::string Program() { return BinDir() + "/gpuslice-test-allocation-failures"; }
  static ProcessResult RunMode(const std::string& mode) { return gpuslice::testing::Run({Program(), mode}, {}, 90000); }
};

TEST_F(SimAllocationFailureTest, EveryEntryPointAnswersEachRefusedAllocationWithAnErrorCode) {
  const ProcessResult r = RunMode("sweep");
  ASSERT_EQ(r.exit_code, 0) << "signal " << r.signal << "\n" << r.out << r.err.substr(0, 4000);
  int points = 0, driver_errors = 0, nvml_errors = 0;
  ASSERT_EQ(std::sscanf(r.out.c_str(),
                        "sweep: %d allocation points refused; %d driver calls answered with an error code, %d NVML",
                        &points, &driver_errors, &nvml_errors),
            3)
      << r.out;
  EXPECT_GT(points, 100);
  EXPECT_GT(driver_errors, 0);
  EXPECT_GT(nvml_errors, 0);
  // A refusal is reported by the entry point that returned the error.
  EXPECT_NE(r.err.find("gpuslice-sim: cuEventCreate: out of memory (std::bad_alloc); it returns an error"),
            std::string::npos);
}

TEST_F(SimAllocationFailureTest, ARefusedWorkerThreadIsAnErrorAndTheStreamWorksAfter) {
  const ProcessResult r = RunMode("threads");
  ASSERT_EQ(r.exit_code, 0) << "signal " << r.signal << "\n" << r.out << r.err;
  EXPECT_NE(r.err.find("gpuslice-sim: cuLaunchHostFunc: the system refused"), std::string::npos) << r.err;
}

TEST_F(SimAllocationFailureTest, WorkThatFailsOnAStreamBreaksItsContextNotTheProcess) {
  const ProcessResult r = RunMode("host-function");
  ASSERT_EQ(r.exit_code, 0) << "signal " << r.signal << "\n" << r.out << r.err;
  EXPECT_NE(r.err.find("work on a stream failed (a host function's own exception)"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("work on a stream failed (std::bad_alloc)"), std::string::npos) << r.err;
}

// The control: the injector's refusal, met by code with no handler, aborts the process.
TEST_F(SimAllocationFailureTest, ControlTheSameRefusalWithoutAHandlerAbortsTheProcess) {
  const ProcessResult r = RunMode("unguarded");
  EXPECT_EQ(r.signal, SIGABRT) << r.out << r.err;
  EXPECT_NE(r.err.find("std::bad_alloc"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace gpuslice::testing
