// The spin_ns kernel (spin_kernel_ptx.h), loaded into the session's context.
#pragma once

#include <cstdint>

#include "workload/options.h"
#include "workload/session.h"

namespace gpuslice::workload {

class SpinKernel {
 public:
  explicit SpinKernel(const Session& session) : session_(session) {}
  ~SpinKernel();
  SpinKernel(const SpinKernel&) = delete;
  SpinKernel& operator=(const SpinKernel&) = delete;

  // cuModuleLoadData + cuModuleGetFunction, and the grid for `width` (a wide grid is the
  // device's SM count x its resident blocks per SM); false after reporting the failing call.
  bool Load(KernelWidth width = KernelWidth::kNarrow);
  // Queues one launch of single-thread blocks whose every thread spins for `ns` nanoseconds.
  bool Launch(CUstream stream, uint64_t ns) const;
  unsigned int blocks() const { return blocks_; }

 private:
  const Session& session_;
  CUmodule module_ = nullptr;
  CUfunction function_ = nullptr;
  unsigned int blocks_ = 1;
};

}  // namespace gpuslice::workload
