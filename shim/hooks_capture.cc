// Stream capture: between cuStreamBeginCapture and cuStreamEndCapture a stream's launches build
// a graph instead of running (shim/stream_capture.h).
#include "shim/driver_api.h"  // first: declares every versioned name

#include "shim/hook_entry.h"
#include "shim/real_driver.h"
#include "shim/stream_capture.h"

namespace gpuslice::shim {

bool StreamCapture::CapturingSlow(CUstream stream, bool per_thread) {
  if (IsThreadStream(stream, per_thread)) return thread_stream_;
  MutexLock lock(&mutex_);
  for (CUstream s : streams_) {
    if (s == stream && s != nullptr) return true;
  }
  return false;
}

void StreamCapture::Began(CUstream stream, bool per_thread) {
  active_.fetch_add(1, std::memory_order_acq_rel);
  if (IsThreadStream(stream, per_thread)) {
    thread_stream_ = true;
    return;
  }
  MutexLock lock(&mutex_);
  for (CUstream& s : streams_) {
    if (s == nullptr) {
      s = stream;
      return;
    }
  }
  // More captures at once than slots: this one's launches are gated like any other (a graph
  // node then waits for the grant at capture, harmlessly).
}

void StreamCapture::Ended(CUstream stream, bool per_thread) {
  bool found = false;
  if (IsThreadStream(stream, per_thread)) {
    found = thread_stream_;
    thread_stream_ = false;
  } else {
    MutexLock lock(&mutex_);
    for (CUstream& s : streams_) {
      if (s == stream && s != nullptr) s = nullptr, found = true;
    }
  }
  if (found) active_.fetch_sub(1, std::memory_order_acq_rel);
}

}  // namespace gpuslice::shim

using gpuslice::shim::StreamCapture;

CUresult CUDAAPI cuStreamBeginCapture_v2(CUstream hStream, CUstreamCaptureMode mode) {
  GPUSLICE_REAL_OR_UNSUPPORTED(cuStreamBeginCapture_v2)
  const CUresult rc = real->cuStreamBeginCapture_v2(hStream, mode);
  if (rc == CUDA_SUCCESS) StreamCapture::Began(hStream, false);
  return rc;
}

CUresult CUDAAPI cuStreamBeginCapture_v2_ptsz(CUstream hStream, CUstreamCaptureMode mode) {
  GPUSLICE_REAL_OR_UNSUPPORTED(cuStreamBeginCapture_v2_ptsz)
  const CUresult rc = real->cuStreamBeginCapture_v2_ptsz(hStream, mode);
  if (rc == CUDA_SUCCESS) StreamCapture::Began(hStream, true);
  return rc;
}

CUresult CUDAAPI cuStreamBeginCaptureToGraph(CUstream hStream, CUgraph hGraph, const CUgraphNode* dependencies,
                                             const CUgraphEdgeData* dependencyData, size_t numDependencies,
                                             CUstreamCaptureMode mode) {
  GPUSLICE_REAL_OR_UNSUPPORTED(cuStreamBeginCaptureToGraph)
  const CUresult rc =
      real->cuStreamBeginCaptureToGraph(hStream, hGraph, dependencies, dependencyData, numDependencies, mode);
  if (rc == CUDA_SUCCESS) StreamCapture::Began(hStream, false);
  return rc;
}

CUresult CUDAAPI cuStreamBeginCaptureToGraph_ptsz(CUstream hStream, CUgraph hGraph, const CUgraphNode* dependencies,
                                                  const CUgraphEdgeData* dependencyData, size_t numDependencies,
                                                  CUstreamCaptureMode mode) {
  GPUSLICE_REAL_OR_UNSUPPORTED(cuStreamBeginCaptureToGraph_ptsz)
  const CUresult rc =
      real->cuStreamBeginCaptureToGraph_ptsz(hStream, hGraph, dependencies, dependencyData, numDependencies, mode);
  if (rc == CUDA_SUCCESS) StreamCapture::Began(hStream, true);
  return rc;
}

namespace {

// The capture is over: it ended, or ended in a capture error (an invalidated capture, say).
bool CaptureOver(CUresult rc) {
  return rc == CUDA_SUCCESS ||
         (rc >= CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED && rc <= CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD);
}

}  // namespace

CUresult CUDAAPI cuStreamEndCapture(CUstream hStream, CUgraph* phGraph) {
  GPUSLICE_REAL_OR_UNSUPPORTED(cuStreamEndCapture)
  const CUresult rc = real->cuStreamEndCapture(hStream, phGraph);
  if (CaptureOver(rc)) StreamCapture::Ended(hStream, false);
  return rc;
}

CUresult CUDAAPI cuStreamEndCapture_ptsz(CUstream hStream, CUgraph* phGraph) {
  GPUSLICE_REAL_OR_UNSUPPORTED(cuStreamEndCapture_ptsz)
  const CUresult rc = real->cuStreamEndCapture_ptsz(hStream, phGraph);
  if (CaptureOver(rc)) StreamCapture::Ended(hStream, true);
  return rc;
}
