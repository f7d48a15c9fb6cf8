// Small helpers for tests that drive the simulated driver directly (linked with -lcuda).
#pragma once

#include <cuda.h>
#include <gtest/gtest.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <functional>
#include <string>

namespace gpuslice::testing {

// A PTX module with the two kinds of kernel the simulator knows: spin_ns(u64) and noop().
inline constexpr const char* kTestPtx = R"(
.version 7.0
.target sm_70
.address_size 64
.visible .entry spin_ns(.param .u64 spin_ns_param_0) { ret; }
.visible .entry noop() { ret; }
)";

#define ASSERT_CU(expr) ASSERT_EQ((expr), CUDA_SUCCESS) << #expr
#define EXPECT_CU(expr) EXPECT_EQ((expr), CUDA_SUCCESS) << #expr

// cuInit + primary context of device 0 made current; returns the spin_ns function.
inline CUfunction InitAndLoadSpin(CUcontext* ctx_out = nullptr, CUdevice device = 0) {
  CUcontext ctx = nullptr;
  CUmodule module = nullptr;
  CUfunction spin = nullptr;
  EXPECT_EQ(cuInit(0), CUDA_SUCCESS);
  EXPECT_EQ(cuDevicePrimaryCtxRetain(&ctx, device), CUDA_SUCCESS);
  EXPECT_EQ(cuCtxSetCurrent(ctx), CUDA_SUCCESS);
  EXPECT_EQ(cuModuleLoadData(&module, kTestPtx), CUDA_SUCCESS);
  EXPECT_EQ(cuModuleGetFunction(&spin, module, "spin_ns"), CUDA_SUCCESS);
  if (ctx_out) *ctx_out = ctx;
  return spin;
}

inline CUresult LaunchSpin(CUfunction spin, uint64_t ns, CUstream stream = nullptr) {
  void* params[] = {&ns};
  return cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, stream, params, nullptr);
}

// A forked child process that reports through a pipe. The child runs `body(write_fd)` and
// exits with its return value; it starts with the simulated driver uninitialised.
class ForkedChild {
 public:
  explicit ForkedChild(const std::function<int(int)>& body) {
    int fds[2];
    if (pipe(fds) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      close(fds[0]);
      _exit(body(fds[1]));
    }
    close(fds[1]);
    read_fd_ = fds[0];
  }
  ~ForkedChild() {
    if (pid_ > 0 && !reaped_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (read_fd_ >= 0) close(read_fd_);
  }
  // Reads one byte the child wrote (blocks); false if the child closed the pipe first.
  bool WaitSignal() {
    char c;
    return read(read_fd_, &c, 1) == 1;
  }
  int Wait() {
    int status = 0;
    waitpid(pid_, &status, 0);
    reaped_ = true;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
  }
  void Kill(int sig) { kill(pid_, sig); }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  int read_fd_ = -1;
  bool reaped_ = false;
};

inline void Signal(int fd) {
  const char c = 1;
  (void)!write(fd, &c, 1);
}

}  // namespace gpuslice::testing
