// The ways of obtaining device memory that `memory --api` chooses between, one Allocator each.
// Whatever an interposer must account for, the workload can exercise in isolation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "workload/options.h"
#include "workload/session.h"

namespace gpuslice::workload {

// Pitched allocations and arrays are shaped as rows of kRowBytes (a smaller chunk is one row of
// its own size), as many rows as it takes to hold the chunk. 64 KiB rows of 1-byte elements are
// within every GPU's 2D-array limits (width 131072, height 65536), so an array chunk can be up to
// kMaxArrayBytes.
inline constexpr uint64_t kRowBytes = 64 * 1024;
inline constexpr uint64_t kMaxArrayBytes = kRowBytes * 65536;

struct Allocation {
  CUdeviceptr ptr = 0;
  // The size charged for it: rounded up to the granularity for vmm, pitch × height for pitch,
  // and for arrays the estimate width × height (the driver may pad rows; it does not say).
  uint64_t bytes = 0;
  size_t pitch = 0;
  CUarray array = nullptr;
  CUmemGenericAllocationHandle handle = 0;
};

enum class Outcome {
  kObtained,
  kRefused,  // the allocating call itself failed: that is the measured result, not an error
  kFailed,   // some other call failed, already reported on stderr
};

class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual bool Prepare() { return true; }  // once, before the first allocation
  // On kRefused, *refusal holds the allocating call's CUresult.
  virtual Outcome Allocate(uint64_t bytes, Allocation* out, CUresult* refusal) = 0;
  // Writes every byte with cuMemsetD8, proving the memory is usable. Not for arrays, which are
  // not linear memory (main.cc refuses --touch with --api array).
  bool Touch(const Allocation& allocation) const;
  virtual bool Free(const Allocation& allocation) = 0;
  virtual bool Finish() { return true; }  // once, after the last free

 protected:
  explicit Allocator(const Session& session) : s_(session) {}
  const Session& s_;
};

// `stream` is where the stream-ordered APIs (async, pool) allocate and free.
std::unique_ptr<Allocator> MakeAllocator(MemoryApi api, const Session& session, CUstream stream);

}  // namespace gpuslice::workload
