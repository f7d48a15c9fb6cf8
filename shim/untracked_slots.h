// Which threads of a process are inside a launch on the untracked path (the tenant alone on the
// GPU): the one thing every such launch must publish, and the monitor must be able to wait out
// when it switches tracking on (shim/launch_tracker.h).
//
// The handshake is Dekker's: a launcher raises its flag, then reads the tracking switch; the
// monitor sets the switch, then reads every flag; one of the two must see the other. Done with
// sequentially consistent atomics on both sides, each launch pays two locked instructions. Here
// the launcher's side is two plain stores to a line only its thread writes, and the monitor pays
// for both sides with membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED), which runs a full barrier on
// every thread of the process (shim/asymmetric_fence.h).
#pragma once

#include <atomic>
#include <cstdint>

#include "shim/asymmetric_fence.h"
#include "shim/thread_number.h"

namespace gpuslice::shim {

class UntrackedSlots {
 public:
  // The first kOwnSlots threads of the process that launch get a flag each (shim/thread_number.h;
  // later threads share one counter, which is only slower).
  static constexpr uint32_t kOwnSlots = 256;

  // What Exit needs to lower the flag Enter raised.
  struct Ticket {
    std::atomic<uint32_t>* flag = nullptr;
    bool shared = false;
  };

  UntrackedSlots() = default;

  // The process's asymmetric fence (the launch lanes' idle handshake uses it too).
  const AsymmetricFence& fence() const { return fence_; }

  // The launcher's side: raise this thread's flag; after it, a full barrier as seen by Drain.
  Ticket Enter() {
    const uint32_t thread = ThreadNumber::Get();
    if (thread < kOwnSlots) {
      std::atomic<uint32_t>& flag = own_[thread].flag;
      flag.store(1, std::memory_order_relaxed);
      fence_.Light();
      return Ticket{&flag, false};
    }
    shared_.count.fetch_add(1);  // seq_cst, a full barrier by itself
    return Ticket{&shared_.count, true};
  }
  static void Exit(const Ticket& ticket) {
    if (ticket.shared) {
      ticket.flag->fetch_sub(1, std::memory_order_release);
    } else {
      ticket.flag->store(0, std::memory_order_release);
    }
  }

  // The monitor's side, after it set the tracking switch: a barrier on every thread, then waits
  // until no thread is inside the untracked path.
  void Drain() const;

 private:
  struct alignas(64) Slot {
    std::atomic<uint32_t> flag{0};
  };
  bool AnyInside() const;

  AsymmetricFence fence_;
  Slot own_[kOwnSlots];
  struct alignas(64) {
    std::atomic<uint32_t> count{0};
  } shared_;
};

}  // namespace gpuslice::shim
