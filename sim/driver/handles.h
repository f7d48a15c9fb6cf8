// What the simulated driver's opaque handles (CUcontext, CUstream, ...) point at.
//
// cuda.h only declares `struct CUctx_st` and friends; the simulator defines them here. Every
// live handle is also recorded in the driver's handle registry, so that a destroyed or forged
// handle is reported as invalid instead of being dereferenced.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "driver_api.h"

namespace gpuslice::sim {
class StreamExecutor;
struct StreamOp;  // complete in stream_executor.h, where graphs' operations are used
}  // namespace gpuslice::sim

struct CUctx_st {
  int device = 0;
  bool primary = false;
  unsigned int flags = 0;
  // The legacy default stream (stream 0) of this context; created with the context.
  CUstream_st* legacy_stream = nullptr;
  std::mutex mutex;
  std::vector<CUstream_st*> streams;  // every stream of the context, the default ones included
  // A fatal fault breaks the context for good (Driver::ContextError): 0 or the CUresult. Shared
  // with its streams' workers, which set it when work fails and may outlive the context.
  std::shared_ptr<std::atomic<int>> sticky_error = std::make_shared<std::atomic<int>>(0);
  uint32_t mps_faults_seen = 0;  // the MPS server's fault count when the context was made
};

struct CUstream_st {
  CUctx_st* context = nullptr;
  unsigned int flags = 0;
  int priority = 0;
  // Shared with a cuCtxSynchronize in progress on another thread, which may outlive the stream
  // (the shim's compute monitor synchronises while the application destroys streams).
  std::shared_ptr<gpuslice::sim::StreamExecutor> executor;
  // While the stream is being captured (cuStreamBeginCapture): the graph its work goes into
  // instead of running.
  std::atomic<CUgraph_st*> capture{nullptr};
};

struct CUevent_st {
  CUctx_st* context = nullptr;
  unsigned int flags = 0;
  std::mutex mutex;
  std::condition_variable completed_cv;
  uint64_t recorded = 0;   // number of times recorded
  uint64_t completed = 0;  // highest record number whose work has completed
  uint64_t completed_ns = 0;
};

// A graph: its kernels in the order they were added (or captured). Launched, they run one after
// another on the stream (sim/driver/api_graph.cc).
struct CUgraph_st {
  CUctx_st* context = nullptr;
  std::mutex mutex;
  std::vector<gpuslice::sim::StreamOp> ops;
};

struct CUgraphExec_st {
  CUctx_st* context = nullptr;
  std::vector<gpuslice::sim::StreamOp> ops;
};

struct CUgraphNode_st {
  CUgraph_st* graph = nullptr;
  size_t index = 0;
};

struct CUmod_st {
  CUctx_st* context = nullptr;
  std::vector<std::string> entries;  // kernel names found in the PTX
  std::vector<CUfunc_st*> functions;
};

struct CUfunc_st {
  CUmod_st* module = nullptr;
  std::string name;
  bool is_spin = false;   // spin_ns: occupies the device for its uint64 argument in ns
  bool is_fault = false;  // fault_illegal_address: a fatal fault when it runs
};
