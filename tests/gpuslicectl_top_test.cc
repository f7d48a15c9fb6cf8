// `gpuslicectl top` run as an operator runs it, in a terminal: a tmux session on a private
// socket, its screen read with `tmux capture-pane`. Tenants are real preloaded processes over
// the simulated GPU. The view must show their memory against their quota, refusals and requests,
// and redraw itself: a tenant started after top appears on the same screen. Skipped, with the
// reason, only when tmux is absent (scripts/install-deps.sh installs it).
#include <gtest/gtest.h>

#include <unistd.h>

#include <string>

#include "tests/support/find_program.h"
#include "tests/support/shim_fixture.h"

namespace gpuslice::testing {
namespace {

class GpuslicectlTopTest : public ShimTest {
 protected:
  void TearDown() override {
    if (!socket_.empty()) gpuslice::testing::Run({tmux_, "-L", socket_, "kill-server"});
    ShimTest::TearDown();
  }

  // Starts `command` in a detached 150x40 tmux session.
  bool StartInTmux(const std::string& command) {
    socket_ = "gpuslice-top-test-" + std::to_string(getpid());
    const ProcessResult r = gpuslice::testing::Run({tmux_, "-L", socket_, "-f", "/dev/null", "new-session", "-d", "-x", "150", "-y", "40",
                                 command});
    return r.exit_code == 0;
  }
  std::string Screen() { return gpuslice::testing::Run({tmux_, "-L", socket_, "capture-pane", "-p"}).out; }
  // Waits until the screen shows every one of `texts`; the last screen in *screen.
  bool ScreenShows(const std::vector<std::string>& texts, std::string* screen, int timeout_ms = 20000) {
    return Eventually(
        [&] {
          *screen = Screen();
          for (const auto& text : texts)
            if (screen->find(text) == std::string::npos) return false;
          return true;
        },
        std::chrono::milliseconds(timeout_ms));
  }

  std::string tmux_ = FindProgram("tmux");
  std::string socket_;
};

TEST_F(GpuslicectlTopTest, RedrawsTenantsMemoryRefusalsAndRequests) {
  if (tmux_.empty()) GTEST_SKIP() << "tmux is not installed (scripts/install-deps.sh installs it)";
  // Quota 100 MiB, five 48 MiB allocations: two held, three refused.
  auto mem = StartHolder({BinDir() + "/gpuslice-workload", "memory", "--chunk", "48Mi", "--count", "5"},
                         {"GPUSLICE_TENANT=mem", "GPUSLICE_MEMORY_LIMIT=100Mi"});
  ASSERT_TRUE(StartInTmux("env GPUSLICE_STATE_DIR=" + state_dir() + " " + BinDir() +
                          "/gpuslicectl top --interval 0.2; sleep 60"));
  std::string screen;
  EXPECT_TRUE(ScreenShows({"gpuslicectl top:", "mem", "[###################-]", "96 MiB / 100 MiB"}, &screen)) << screen;
  // The mem row: three refusals, one process.
  const size_t row = screen.find("  mem ");
  ASSERT_NE(row, std::string::npos) << screen;
  const std::string line = screen.substr(row, screen.find('\n', row) - row);
  EXPECT_NE(line.find("       3     1"), std::string::npos) << line;

  // A tenant started now appears in the running view, with its request.
  auto compute = StartShimmed({BinDir() + "/gpuslice-workload", "compute", "--duration", "60", "--ready-line"},
                              {"GPUSLICE_TENANT=trainer", "GPUSLICE_COMPUTE_REQUEST=60%"});
  ASSERT_TRUE(compute->WaitForOutput("\"event\":\"ready\"")) << compute->StderrSoFar();
  EXPECT_TRUE(ScreenShows({"trainer", "standard", "60%"}, &screen)) << screen;
  // Nothing else was asked of the view: it is still the first process, still running.
  EXPECT_NE(screen.find("mem"), std::string::npos) << screen;
  EXPECT_EQ(screen.find("gpuslicectl:"), std::string::npos) << screen;

  // --once prints one frame, without the terminal's clear sequence, for scripts.
  const ProcessResult once = gpuslice::testing::Run({BinDir() + "/gpuslicectl", "top", "--once", "--state-dir", state_dir()});
  EXPECT_EQ(once.exit_code, 0) << once.err;
  EXPECT_NE(once.out.find("96 MiB / 100 MiB"), std::string::npos) << once.out;
  EXPECT_NE(once.out.find("trainer"), std::string::npos) << once.out;
  EXPECT_EQ(once.out.find("\033["), std::string::npos);
  compute->Kill(SIGTERM);
  Stop(*mem);
}

TEST_F(GpuslicectlTopTest, OnceWithoutStateSaysWhyAndFails) {
  const ProcessResult once = gpuslice::testing::Run({BinDir() + "/gpuslicectl", "top", "--once", "--state-dir", state_dir() + "/none"});
  EXPECT_EQ(once.exit_code, 1);
  EXPECT_NE(once.err.find("does not exist"), std::string::npos) << once.err;
  const ProcessResult bad = gpuslice::testing::Run({BinDir() + "/gpuslicectl", "top", "--interval", "0"});
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
}

}  // namespace
}  // namespace gpuslice::testing
