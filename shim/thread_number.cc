#include "shim/thread_number.h"

#include <atomic>

namespace gpuslice::shim {

uint32_t ThreadNumber::Assign() {
  static std::atomic<uint32_t> next{0};
  const uint32_t number = next.fetch_add(1, std::memory_order_relaxed);
  plus_one_ = number < UINT32_MAX ? number + 1 : UINT32_MAX;
  return number;
}

}  // namespace gpuslice::shim
