// `gpuslicectl top` run as an operator runs it, in a terminal: a tmux session on a private
// socket, its screen read with `tmux capture-pane`. Tenants are real preloaded processes over
// the simulated GPU. The view must show their memory against their quota, refusals and requests,
// and redraw itself: a tenant started after top appears on the same screen. Skipped, with the
// reason, only when tmux is absent (scripts/install-deps.sh installs it).
#include <gtest/gtest.h>

#include <unistd.h>

#include <string>

#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include "broker/broker.h"
#include "tests/support/broker_test_util.h"
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

  // Starts `command` in a detached tmux session of `columns` x `rows` (150 x 40 by default).
  bool StartInTmux(const std::string& command, int columns = 150, int rows = 40) {
    socket_ = "gpuslice-top-test-" + std::to_string(getpid());
    const ProcessResult r = gpuslice::testing::Run({tmux_, "-L", socket_, "-f", "/dev/null", "new-session", "-d", "-x",
                                                    std::to_string(columns), "-y", std::to_string(rows), command});
    return r.exit_code == 0;
  }
  void SendKey(const std::string& key) { gpuslice::testing::Run({tmux_, "-L", socket_, "send-keys", key}); }
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
  EXPECT_TRUE(ScreenShows({"gpuslicectl top:", "mem", "[###################-]", "96 MiB / 100 MiB"}, &screen))
      << screen;
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
  const ProcessResult once =
      gpuslice::testing::Run({BinDir() + "/gpuslicectl", "top", "--once", "--state-dir", state_dir()});
  EXPECT_EQ(once.exit_code, 0) << once.err;
  EXPECT_NE(once.out.find("96 MiB / 100 MiB"), std::string::npos) << once.out;
  EXPECT_NE(once.out.find("trainer"), std::string::npos) << once.out;
  EXPECT_EQ(once.out.find("\033["), std::string::npos);
  compute->Kill(SIGTERM);
  Stop(*mem);
}

// Tenants that only hold memory, each a forked process registered with the broker (no driver
// needed), killed when the test ends.
class ForkedTenants {
 public:
  ForkedTenants(const std::string& state_dir, int count) {
    for (int i = 0; i < count; ++i) {
      char name[32];
      std::snprintf(name, sizeof name, "tenant-%02d", i);
      int ready[2];
      if (pipe(ready) != 0) return;
      const pid_t pid = fork();
      if (pid == 0) {
        close(ready[0]);
        auto attached = broker::Broker::Attach(state_dir);
        std::unique_ptr<broker::Broker> broker = attached.ok() ? std::move(attached).value() : nullptr;
        char ok = '0';
        if (broker && broker->Register(name).ok()) {
          const Result<broker::LedgerId> ledger = broker->OpenLedger(kTestUuid, kTestGpuTotal, 1ULL << 30);
          if (ledger.ok() && broker->Reserve(*ledger, static_cast<uint64_t>(i + 1) << 20)) ok = '1';
        }
        (void)!write(ready[1], &ok, 1);
        for (;;) pause();
      }
      close(ready[1]);
      char ok = '0';
      (void)!read(ready[0], &ok, 1);
      close(ready[0]);
      pids_.push_back(pid);
      all_ready_ = all_ready_ && ok == '1';
    }
  }
  ~ForkedTenants() {
    for (pid_t pid : pids_) kill(pid, SIGKILL);
    for (pid_t pid : pids_) waitpid(pid, nullptr, 0);
  }
  bool ready() const { return all_ready_ && !pids_.empty(); }

 private:
  std::vector<pid_t> pids_;
  bool all_ready_ = true;
};

std::vector<std::string> Lines(const std::string& screen) {
  std::vector<std::string> lines;
  std::istringstream in(screen);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// 64 tenants in an 80 x 24 terminal: rows of at most 80 columns (none wraps), the GPU's header
// and the column headings on screen on every page, a full page of tenants, a sort by memory
// (`s`) that puts the largest first, and a second page (`n`) under the same headings.
TEST_F(GpuslicectlTopTest, SixtyFourTenantsInAnEightyByTwentyFourPaneKeepTheirHeadings) {
  if (tmux_.empty()) GTEST_SKIP() << "tmux is not installed (scripts/install-deps.sh installs it)";
  ForkedTenants tenants(state_dir(), 64);
  ASSERT_TRUE(tenants.ready());
  ASSERT_TRUE(StartInTmux("env GPUSLICE_STATE_DIR=" + state_dir() + " " + BinDir() +
                              "/gpuslicectl top --interval 0.5; sleep 60",
                          80, 24));
  std::string screen;
  ASSERT_TRUE(ScreenShows({"TENANT", "USED/QUOTA", "page 1/", "tenant-00"}, &screen)) << screen;
  auto check_page = [&](const std::string& screen) {
    const auto lines = Lines(screen);
    int rows = 0, header_lines = 0;
    bool header = false, headings = false;
    for (const auto& line : lines) {
      EXPECT_LE(line.size(), 80u) << line;
      header = header || line.starts_with("GPU-");
      headings = headings || line.starts_with("  TENANT ");
      // The GPU's header goes on over lines rather than being cut (80 columns hold less of it).
      header_lines += header && !headings;
      rows += line.starts_with("  tenant-");
    }
    EXPECT_TRUE(header) << "the GPU's header is on screen:\n" << screen;
    EXPECT_TRUE(headings) << "the column headings are on screen:\n" << screen;
    EXPECT_EQ(rows, 24 - 3 - header_lines - 1)
        << "a full page: 24 lines less the title, the footer, the GPU's header and the headings\n"
        << screen;
    return lines;
  };
  check_page(screen);
  // Sort by memory: tenant-63 holds the most (64 MiB).
  SendKey("s");
  ASSERT_TRUE(ScreenShows({"sorted by memory"}, &screen)) << screen;
  auto lines = check_page(screen);
  const auto first =
      std::find_if(lines.begin(), lines.end(), [](const std::string& l) { return l.starts_with("  tenant-"); });
  ASSERT_NE(first, lines.end());
  EXPECT_TRUE(first->starts_with("  tenant-63 ")) << screen;
  // The next page, under the same headings.
  SendKey("n");
  ASSERT_TRUE(ScreenShows({"page 2/"}, &screen)) << screen;
  check_page(screen);
  EXPECT_EQ(screen.find("tenant-63 "), std::string::npos) << "page 2 holds the next tenants: " << screen;
}

// At 80 x 24 no name is cut: the holder's in the GPU's header (which goes on over lines), a long
// tenant name on a line of its own above its figures. They were cut to "team-~" and
// "team-a.inferenc~"; status named the process "gpuslice-worklo" (the kernel's 15 bytes of it).
TEST_F(GpuslicectlTopTest, AtEightyByTwentyFourNoNameIsCut) {
  if (tmux_.empty()) GTEST_SKIP() << "tmux is not installed (scripts/install-deps.sh installs it)";
  const std::string holder = "team-a.inference-serving-production-europe-west4-canary";  // 55 bytes
  const std::string longest = std::string("b") + std::string(62, 'x');                   // 63 bytes
  auto compute = StartShimmed({BinDir() + "/gpuslice-workload", "compute", "--duration", "60", "--ready-line"},
                              {"GPUSLICE_TENANT=" + holder, "GPUSLICE_COMPUTE_REQUEST=50"});
  ASSERT_TRUE(compute->WaitForOutput("\"event\":\"ready\"")) << compute->StderrSoFar();
  auto mem = StartHolder({BinDir() + "/gpuslice-workload", "memory", "--chunk", "48Mi", "--count", "1"},
                         {"GPUSLICE_TENANT=" + longest, "GPUSLICE_MEMORY_LIMIT=100Mi"});
  ASSERT_TRUE(StartInTmux("env GPUSLICE_STATE_DIR=" + state_dir() + " " + BinDir() +
                              "/gpuslicectl top --interval 0.3; sleep 60",
                          80, 24));
  std::string screen;
  EXPECT_TRUE(
      ScreenShows({"holder " + holder, "\n  " + holder + "\n", "\n  " + longest + "\n", "48MiB/100MiB"}, &screen))
      << screen;
  for (const auto& line : Lines(screen)) {
    EXPECT_LE(line.size(), 80u) << line;
    EXPECT_EQ(line.find('~'), std::string::npos) << "a name cut: " << line;
  }
  const ProcessResult status = gpuslice::testing::Run({BinDir() + "/gpuslicectl", "status", "--state-dir", state_dir()},
                                                      {"LD_LIBRARY_PATH=" + SimLibDir()});
  EXPECT_NE(status.out.find(" gpuslice-workload ("), std::string::npos) << status.out;
  compute->Kill(SIGTERM);
  Stop(*mem);
}

// docs/observability.md's frame of `top --once` is what the command prints: the commands under it
// run here as written (in a directory whose build/ is this build, with this test's state), and
// the frame is compared with the documented one line by line, word by word, the figures that vary
// from run to run (numbers, the holder) aside. The documented frame once showed values the
// command did not print.
TEST_F(GpuslicectlTopTest, TheDocumentedOnceFrameIsWhatTheCommandPrints) {
  std::ifstream in(SourceDir() + "/docs/observability.md");
  const std::string doc((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t intro = doc.find("A frame of `gpuslicectl top --once`");
  ASSERT_NE(intro, std::string::npos);
  const size_t frame_at = doc.find("```\n", intro) + 4;
  const std::string frame = doc.substr(frame_at, doc.find("```\n", frame_at) - frame_at);
  const size_t commands_at = doc.find("```sh\n", frame_at) + 6;
  std::string commands = doc.substr(commands_at, doc.find("```\n", commands_at) - commands_at);
  for (const auto& [from, to] :
       std::vector<std::pair<std::string, std::string>>{{"/dev/shm/top-demo", state_dir() + "/sim"},
                                                        {"/tmp/top-demo", state_dir() + "/state"}}) {
    for (size_t at = commands.find(from); at != std::string::npos; at = commands.find(from, at + to.size()))
      commands.replace(at, from.size(), to);
  }
  const std::string root = state_dir() + "/root";
  std::filesystem::create_directories(root);
  std::filesystem::create_symlink(std::filesystem::path(BinDir()).parent_path(), root + "/build");
  const ProcessResult r =
      gpuslice::testing::Run({"/bin/sh", "-c", "cd \"$0\" && " + commands + "\nwait", root}, {}, 60000);
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  // The frame, without what the tenants print (their JSON lines) around it.
  std::string printed;
  for (const auto& line : Lines(r.out.substr(r.out.find("GPU-"))))
    if (!line.starts_with("{")) printed += line + "\n";
  auto words = [](const std::string& line) {
    std::vector<std::string> out;
    std::istringstream in(line);
    bool after_holder = false;
    for (std::string word; in >> word;) {
      const bool varies = after_holder || std::any_of(word.begin(), word.end(), [](char c) { return std::isdigit(c); });
      out.push_back(varies ? "#" : word);
      after_holder = word == "holder";
    }
    return out;
  };
  const auto documented = Lines(frame), got = Lines(printed);
  ASSERT_EQ(documented.size(), got.size()) << "documented:\n" << frame << "printed:\n" << printed;
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_EQ(words(documented[i]), words(got[i])) << "documented:\n" << documented[i] << "\nprinted:\n" << got[i];
}

TEST_F(GpuslicectlTopTest, OnceWithoutStateSaysWhyAndFails) {
  const ProcessResult once =
      gpuslice::testing::Run({BinDir() + "/gpuslicectl", "top", "--once", "--state-dir", state_dir() + "/none"});
  EXPECT_EQ(once.exit_code, 1);
  EXPECT_NE(once.err.find("does not exist"), std::string::npos) << once.err;
  const ProcessResult bad = gpuslice::testing::Run({BinDir() + "/gpuslicectl", "top", "--interval", "0"});
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
}

}  // namespace
}  // namespace gpuslice::testing
