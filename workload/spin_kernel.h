// The spin_ns kernel (spin_kernel_ptx.h), loaded into the session's context.
#pragma once

#include <cstdint>

#include "workload/session.h"

namespace gpuslice::workload {

class SpinKernel {
 public:
  explicit SpinKernel(const Session& session) : session_(session) {}
  ~SpinKernel();
  SpinKernel(const SpinKernel&) = delete;
  SpinKernel& operator=(const SpinKernel&) = delete;

  // cuModuleLoadData + cuModuleGetFunction; false after reporting the failing call.
  bool Load();
  // Queues one single-thread launch that occupies the device for `ns` nanoseconds.
  bool Launch(CUstream stream, uint64_t ns) const;

 private:
  const Session& session_;
  CUmodule module_ = nullptr;
  CUfunction function_ = nullptr;
};

}  // namespace gpuslice::workload
