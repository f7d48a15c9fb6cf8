// A small number for each thread of the process, from 0 in the order threads first ask for one
// (they ask at their first gated launch). Per-thread state of the launch path (untracked flags,
// launch lanes) is an array indexed by it: no lookup, no lock. Numbers are never reused: a
// process that churns through threads ends up past the arrays, on their shared fallbacks.
#pragma once

#include <cstdint>

namespace gpuslice::shim {

class ThreadNumber {
 public:
  static uint32_t Get() {
    const uint32_t known = plus_one_;
    return known != 0 ? known - 1 : Assign();
  }

 private:
  static uint32_t Assign();
  // Initial-exec TLS: the shim is preloaded, so its few bytes of thread-local storage come from
  // the static block and a read is one instruction rather than a call to __tls_get_addr.
  __attribute__((tls_model("initial-exec"))) static inline thread_local uint32_t plus_one_ = 0;
};

}  // namespace gpuslice::shim
