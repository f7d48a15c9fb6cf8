// Helpers for the broker tests: a private state directory per test, forked children that run a
// function and _exit (never returning into GoogleTest), and anonymous shared memory through which
// children report to the test.
#pragma once

#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <functional>
#include <new>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/status.h"

namespace gpuslice::testing {

// A fresh directory under /dev/shm (tmpfs, as the default /run/gpuslice is), removed afterwards.
// state_dir() names a subdirectory that does not exist yet, so that Attach creates it.
class BrokerTempDir {
 public:
  BrokerTempDir() {
    char pattern[] = "/dev/shm/gpuslice-broker-test-XXXXXX";
    root_ = mkdtemp(pattern) ? pattern : "";
  }
  ~BrokerTempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(root_, ignored);
  }
  BrokerTempDir(const BrokerTempDir&) = delete;
  BrokerTempDir& operator=(const BrokerTempDir&) = delete;

  const std::string& root() const { return root_; }
  std::string state_dir() const { return root_ + "/state"; }
  std::string state_file() const { return state_dir() + "/gpuslice.state"; }

 private:
  std::string root_;
};

// Runs fn in a forked child, which exits with fn's return value (2 if it threw).
inline pid_t ForkChild(const std::function<int()>& fn) {
  const pid_t pid = fork();
  if (pid == 0) {
    int code = 2;
    try {
      code = fn();
    } catch (...) {
    }
    _exit(code);
  }
  return pid;
}

// A waitpid status as an exit code: the child's own, or 128 + signal when a signal ended it.
inline int ExitCodeOf(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : -1;
}

// The child's exit code (ExitCodeOf).
inline int WaitChild(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return ExitCodeOf(status);
}

// Children of one test: whichever are still running when it goes out of scope are killed and
// reaped, so that a failed assertion never leaves busy processes behind.
class ChildGroup {
 public:
  ChildGroup() = default;
  ~ChildGroup() {
    for (pid_t pid : pids_) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  }
  ChildGroup(const ChildGroup&) = delete;
  ChildGroup& operator=(const ChildGroup&) = delete;

  pid_t Fork(const std::function<int()>& fn) {
    const pid_t pid = ForkChild(fn);
    pids_.push_back(pid);
    return pid;
  }
  // Waits for the child (see WaitChild); it is no longer this group's. A child still running
  // after `timeout` (a hang: every child of these tests ends in seconds, a minute under a
  // sanitizer) is killed and the test fails naming it, before ctest's 300 s timeout would kill
  // the test without saying which child hung.
  int Wait(pid_t pid, std::chrono::seconds timeout = std::chrono::seconds(240)) {
    std::erase(pids_, pid);
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    int status = 0;
    for (;;) {
      const pid_t done = waitpid(pid, &status, WNOHANG);
      if (done == pid) break;
      if (done < 0 && errno != EINTR) return -1;
      if (std::chrono::steady_clock::now() >= deadline) {
        kill(pid, SIGKILL);
        waitpid(pid, nullptr, 0);
        ADD_FAILURE() << "child " << pid << " still running after " << timeout.count() << " s: killed";
        return -2;
      }
      usleep(2000);
    }
    return ExitCodeOf(status);
  }
  // True when the child has exited (it is then reaped).
  bool Exited(pid_t pid) {
    if (waitpid(pid, nullptr, WNOHANG) != pid) return false;
    std::erase(pids_, pid);
    return true;
  }
  const std::vector<pid_t>& pids() const { return pids_; }

 private:
  std::vector<pid_t> pids_;
};

// An object of type T in anonymous shared memory, visible to children forked afterwards.
template <typename T>
class Shared {
 public:
  Shared() {
    void* memory = mmap(nullptr, sizeof(T), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    value_ = new (memory) T();
  }
  ~Shared() {
    value_->~T();
    munmap(value_, sizeof(T));
  }
  Shared(const Shared&) = delete;
  Shared& operator=(const Shared&) = delete;
  T* operator->() { return value_; }
  T& operator*() { return *value_; }

 private:
  T* value_;
};

inline constexpr uint8_t kTestUuid[16] = {0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88,
                                          0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff, 0x01};
inline constexpr uint64_t kTestGpuTotal = 80ULL << 30;
inline constexpr uint64_t kMiB = 1ULL << 20;

inline double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// EXPECT_TRUE(IsOk(broker->Register("a"))): on failure, the error's line is the message.
template <class S>
::testing::AssertionResult IsOk(const S& status_or_result) {
  if (status_or_result.ok()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << status_or_result.message();
}

// The value of a Result that should hold one; the test fails (and T() is returned) when not.
template <class T>
T ValueOf(Result<T> result) {
  EXPECT_TRUE(result.ok()) << result.message();
  return result.ok() ? std::move(result).value() : T();
}

// The error's line of a Status or Result that should be an error; the test fails when it is not.
template <class S>
std::string ErrorOf(const S& status_or_result) {
  EXPECT_FALSE(status_or_result.ok()) << "succeeded where an error was expected";
  return status_or_result.message();
}

}  // namespace gpuslice::testing
