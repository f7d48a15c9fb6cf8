// Streams the application is capturing into a CUDA graph (cuStreamBeginCapture ...
// cuStreamEndCapture). A launch into such a stream runs nothing: it becomes a node of the graph,
// which runs when the graph is launched (that launch is gated). So it is not gated or counted,
// and the shim must not record a marker into the stream or ask the driver about it: both would
// end up in the graph, or invalidate the capture.
#pragma once

#include <atomic>
#include <cstdint>

#include "common/mutex.h"
#include "common/mutex_lock.h"
#include "common/thread_annotations.h"
#include "shim/driver_api.h"

namespace gpuslice::shim {

class StreamCapture {
 public:
  // Whether `stream` (a launch's, `per_thread`: through a _ptsz entry point) is being captured.
  // One load while nothing is.
  static bool Capturing(CUstream stream, bool per_thread) {
    if (active_.load(std::memory_order_acquire) == 0) return false;
    return CapturingSlow(stream, per_thread);
  }
  static void Began(CUstream stream, bool per_thread);
  static void Ended(CUstream stream, bool per_thread);

 private:
  static bool IsThreadStream(CUstream stream, bool per_thread) {
    return stream == CU_STREAM_PER_THREAD || (stream == nullptr && per_thread);
  }
  static bool CapturingSlow(CUstream stream, bool per_thread);

  static constexpr int kStreams = 64;
  static inline std::atomic<int> active_{0};
  static inline Mutex mutex_;
  static inline CUstream streams_[kStreams] GUARDED_BY(mutex_) = {};
  __attribute__((tls_model("initial-exec"))) static inline thread_local bool thread_stream_ = false;
};

}  // namespace gpuslice::shim
