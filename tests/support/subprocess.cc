#include "tests/support/subprocess.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

extern char** environ;

namespace gpuslice::testing {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string TempPath(const char* tag) {
  static std::atomic<int> counter{0};
  return "/tmp/gpuslice-test-" + std::to_string(getpid()) + "-" + std::to_string(++counter) + "." + tag;
}

std::string NameOf(const std::string& entry) { return entry.substr(0, entry.find('=')); }

// The child's environment: the inherited one (less what `inherit` drops and what `env` replaces),
// then `env`.
std::vector<std::string> ChildEnvironment(const std::vector<std::string>& env, Inherit inherit) {
  std::vector<std::string> names;
  for (const auto& e : env) names.push_back(NameOf(e));
  std::vector<std::string> out;
  for (char** e = environ; *e; ++e) {
    const std::string entry = *e;
    if (inherit == Inherit::kAllButGpuslice && (entry.rfind("GPUSLICE_", 0) == 0 || entry.rfind("LD_PRELOAD=", 0) == 0))
      continue;
    bool replaced = false;
    for (const auto& name : names) replaced = replaced || NameOf(entry) == name;
    if (!replaced) out.push_back(entry);
  }
  // Of two entries naming the same variable the later one wins, as with putenv.
  for (size_t i = 0; i < env.size(); ++i) {
    bool later = false;
    for (size_t j = i + 1; j < env.size(); ++j) later = later || names[j] == names[i];
    if (!later) out.push_back(env[i]);
  }
  return out;
}

}  // namespace

Subprocess::Subprocess(std::vector<std::string> argv, std::vector<std::string> env, Inherit inherit)
    : out_path_(TempPath("out")), err_path_(TempPath("err")) {
  std::vector<std::string> environment = ChildEnvironment(env, inherit);
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  std::vector<char*> envp;
  for (auto& e : environment) envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_ = fork();
  if (pid_ == 0) {
    const int out = open(out_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    const int err = open(err_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(out, 1);
    dup2(err, 2);
    execve(args[0], args.data(), envp.data());
    dprintf(2, "exec %s failed: %s\n", args[0], std::strerror(errno));
    _exit(127);
  }
  if (pid_ < 0) reaped_ = true;
}

Subprocess::~Subprocess() {
  if (!reaped_ && pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  unlink(out_path_.c_str());
  unlink(err_path_.c_str());
}

void Subprocess::Kill(int signal) {
  if (!reaped_ && pid_ > 0) kill(pid_, signal);
}

void Subprocess::Reaped(int status) {
  reaped_ = true;
  result_.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  result_.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  result_.out = ReadFile(out_path_);
  result_.err = ReadFile(err_path_);
}

ProcessResult Subprocess::Wait(int timeout_ms) {
  if (reaped_) return result_;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  int status = 0;
  while (true) {
    const pid_t rc = waitpid(pid_, &status, WNOHANG);
    if (rc == pid_) break;
    if (rc < 0 && errno != EINTR) break;
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  Reaped(status);
  return result_;
}

std::string Subprocess::StdoutSoFar() const { return ReadFile(out_path_); }
std::string Subprocess::StderrSoFar() const { return ReadFile(err_path_); }

bool Subprocess::WaitForOutput(const std::string& text, int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    if (StdoutSoFar().find(text) != std::string::npos) return true;
    int status = 0;
    if (!reaped_ && waitpid(pid_, &status, WNOHANG) == pid_) {
      Reaped(status);
      return result_.out.find(text) != std::string::npos;
    }
    if (reaped_) return StdoutSoFar().find(text) != std::string::npos;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return false;
}

ProcessResult Run(std::vector<std::string> argv, std::vector<std::string> env, int timeout_ms) {
  Subprocess p(std::move(argv), std::move(env));
  return p.Wait(timeout_ms);
}

}  // namespace gpuslice::testing
