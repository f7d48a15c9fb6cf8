#include "shim/asymmetric_fence.h"

#include <linux/membarrier.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace gpuslice::shim {
namespace {

long Membarrier(int cmd) { return syscall(SYS_membarrier, cmd, 0U, 0); }

}  // namespace

AsymmetricFence::AsymmetricFence() : asymmetric_(Membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0) {}

void AsymmetricFence::Heavy() const {
  if (asymmetric_) {
    // Fails only unregistered, which the constructor rules out; a scheduling round is then the
    // best left to do (a thread switch is a full barrier on the threads it switches).
    if (Membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0) sched_yield();
  } else {
    std::atomic_thread_fence(std::memory_order_seq_cst);
  }
}

}  // namespace gpuslice::shim
