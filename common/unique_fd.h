// Ownership of a file descriptor and of a dlopen() handle: closed once, by their owner, on every
// path out (an early error return included), never by hand.
#pragma once

#include <dlfcn.h>
#include <unistd.h>

#include <utility>

namespace gpuslice {

// A descriptor this object owns (-1: none). Closing is close(2) only, so it is safe in a
// pthread_atfork child handler.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { Close(); }
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) reset(other.release());
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  // Gives the descriptor up without closing it.
  [[nodiscard]] int release() { return std::exchange(fd_, -1); }
  // Closes the descriptor held (if any) and holds `fd` instead.
  void reset(int fd = -1) {
    Close();
    fd_ = fd;
  }

 private:
  void Close() {
    if (fd_ >= 0) ::close(fd_);
  }
  int fd_ = -1;
};

// A dlopen() handle this object owns (nullptr: none), dlclose()d when it goes. Libraries that
// must stay loaded for good (the CUDA driver the shim forwards to, NVML) are release()d.
class UniqueDl {
 public:
  UniqueDl() = default;
  explicit UniqueDl(void* handle) : handle_(handle) {}
  ~UniqueDl() {
    if (handle_) dlclose(handle_);
  }
  UniqueDl(UniqueDl&& other) noexcept : handle_(other.release()) {}
  UniqueDl& operator=(UniqueDl&& other) noexcept {
    if (this != &other) {
      if (handle_) dlclose(handle_);
      handle_ = other.release();
    }
    return *this;
  }
  UniqueDl(const UniqueDl&) = delete;
  UniqueDl& operator=(const UniqueDl&) = delete;

  void* get() const { return handle_; }
  explicit operator bool() const { return handle_ != nullptr; }
  [[nodiscard]] void* release() { return std::exchange(handle_, nullptr); }

 private:
  void* handle_ = nullptr;
};

}  // namespace gpuslice
