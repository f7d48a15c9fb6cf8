// A Dekker handshake whose one side is hot (a launch) and whose other side is rare (a monitor
// switching tracking on, a consumer finding a lane idle): the hot side pays a compiler barrier,
// the rare side a membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED), which runs a full barrier on every
// thread of the process (the asymmetric fence of folly and liburcu). Where the kernel refuses
// membarrier (older than 4.14, a seccomp profile), the hot side fences itself instead.
//
// The pattern, for a hot store H, hot load h, rare store R and rare load r:
//   hot:  H; Light(); h          rare: R; Heavy(); r
// at least one of h and r sees the other side's store.
#pragma once

#include <atomic>

namespace gpuslice::shim {

class AsymmetricFence {
 public:
  // Registers the process (per address space: a forked child registers again when it creates its
  // own fence).
  AsymmetricFence();

  void Light() const {
    if (asymmetric_) {
      std::atomic_signal_fence(std::memory_order_seq_cst);  // the compiler keeps the order
    } else {
      std::atomic_thread_fence(std::memory_order_seq_cst);
    }
  }
  void Heavy() const;

 private:
  bool asymmetric_;  // membarrier(PRIVATE_EXPEDITED) is registered for this process
};

}  // namespace gpuslice::shim
