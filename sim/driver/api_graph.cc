// CUDA graphs: built with the graph API or captured from a stream, instantiated, launched.
//
// A graph here is its kernels in the order they were added or captured; a launch runs them one
// after another on the stream, as a chain of dependent kernels does on a GPU (a graph with
// parallel branches runs them in turn: the simulated device runs one kernel of a context at a
// time anyway). One launch call submits the whole graph: what makes graphs cheaper to launch
// than their kernels one by one (sim/call_model.h charges a graph launch as one launch).
#include "driver_api.h"

#include "driver_state.h"
#include "stream_executor.h"

namespace gpuslice::sim {

// In api_module_launch.cc: the operation a kernel launch enqueues.
CUresult KernelOp(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                  void** kernelParams, void** extra, CUctx_st* ctx, StreamOp* op);

namespace {

CUresult BeginCapture(CUstream hStream, bool per_thread) {
  Driver* d = nullptr;
  CUctx_st* ctx = nullptr;
  if (CUresult rc = RequireContext(&d, &ctx); rc != CUDA_SUCCESS) return rc;
  if (!per_thread && (hStream == nullptr || hStream == CU_STREAM_LEGACY))
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;  // the legacy stream cannot be captured
  CUstream_st* s = nullptr;
  if (CUresult rc = ResolveStream(hStream, per_thread, &s); rc != CUDA_SUCCESS) return rc;
  auto* graph = new CUgraph_st();
  graph->context = s->context;
  CUgraph_st* expected = nullptr;
  if (!s->capture.compare_exchange_strong(expected, graph)) {
    delete graph;
    return CUDA_ERROR_ILLEGAL_STATE;
  }
  return CUDA_SUCCESS;
}

CUresult EndCapture(CUstream hStream, CUgraph* phGraph, bool per_thread) {
  Driver* d = nullptr;
  if (CUresult rc = RequireInit(&d); rc != CUDA_SUCCESS) return rc;
  if (!phGraph) return CUDA_ERROR_INVALID_VALUE;
  CUstream_st* s = nullptr;
  if (CUresult rc = ResolveStream(hStream, per_thread, &s); rc != CUDA_SUCCESS) return rc;
  CUgraph_st* graph = s->capture.exchange(nullptr);
  if (!graph) return CUDA_ERROR_ILLEGAL_STATE;
  d->Register(graph);
  *phGraph = graph;
  return CUDA_SUCCESS;
}

CUresult IsCapturing(CUstream hStream, CUstreamCaptureStatus* status, bool per_thread) {
  if (!status) return CUDA_ERROR_INVALID_VALUE;
  CUstream_st* s = nullptr;
  if (CUresult rc = ResolveStream(hStream, per_thread, &s); rc != CUDA_SUCCESS) return rc;
  *status = s->capture.load() ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
  return CUDA_SUCCESS;
}

CUresult GraphLaunch(CUgraphExec exec, CUstream hStream, bool per_thread) {
  Driver* d = nullptr;
  if (CUresult rc = RequireInit(&d); rc != CUDA_SUCCESS) return rc;
  if (!exec || !d->IsRegistered(exec)) return CUDA_ERROR_INVALID_HANDLE;
  CUstream_st* s = nullptr;
  if (CUresult rc = ResolveStream(hStream, per_thread, &s); rc != CUDA_SUCCESS) return rc;
  if (s->context != exec->context) return CUDA_ERROR_INVALID_CONTEXT;
  for (const StreamOp& op : exec->ops) s->executor->Enqueue(StreamOp(op));
  return CUDA_SUCCESS;
}

}  // namespace

// A kernel launched into a stream being captured goes into its graph (sim/driver/api_module_launch.cc).
bool CaptureLaunch(CUstream_st* s, StreamOp&& op) {
  CUgraph_st* graph = s->capture.load();
  if (!graph) return false;
  std::lock_guard<std::mutex> lock(graph->mutex);
  graph->ops.push_back(std::move(op));
  return true;
}

}  // namespace gpuslice::sim

using namespace gpuslice::sim;

CUresult CUDAAPI cuGraphCreate(CUgraph* phGraph, unsigned int flags) try {
  GPUSLICE_SIM_ENTRY();
  Driver* d = nullptr;
  CUctx_st* ctx = nullptr;
  if (CUresult rc = RequireContext(&d, &ctx); rc != CUDA_SUCCESS) return rc;
  if (!phGraph || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  auto* graph = new CUgraph_st();
  graph->context = ctx;
  d->Register(graph);
  *phGraph = graph;
  return CUDA_SUCCESS;
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuGraphDestroy(CUgraph hGraph) try {
  GPUSLICE_SIM_ENTRY();
  Driver* d = nullptr;
  if (CUresult rc = RequireInit(&d); rc != CUDA_SUCCESS) return rc;
  if (!hGraph || !d->IsRegistered(hGraph)) return CUDA_ERROR_INVALID_HANDLE;
  d->Unregister(hGraph);
  delete hGraph;
  return CUDA_SUCCESS;
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuGraphAddKernelNode_v2(CUgraphNode* phGraphNode, CUgraph hGraph, const CUgraphNode* dependencies,
                                         size_t numDependencies, const CUDA_KERNEL_NODE_PARAMS* nodeParams) try {
  GPUSLICE_SIM_ENTRY();
  Driver* d = nullptr;
  if (CUresult rc = RequireInit(&d); rc != CUDA_SUCCESS) return rc;
  if (!phGraphNode || !nodeParams || (numDependencies != 0 && !dependencies)) return CUDA_ERROR_INVALID_VALUE;
  if (!hGraph || !d->IsRegistered(hGraph)) return CUDA_ERROR_INVALID_HANDLE;
  const CUDA_KERNEL_NODE_PARAMS& p = *nodeParams;
  StreamOp op;
  if (CUresult rc = KernelOp(p.func, p.gridDimX, p.gridDimY, p.gridDimZ, p.blockDimX, p.blockDimY, p.blockDimZ,
                             p.kernelParams, p.extra, hGraph->context, &op);
      rc != CUDA_SUCCESS)
    return rc;
  std::lock_guard<std::mutex> lock(hGraph->mutex);
  hGraph->ops.push_back(std::move(op));
  auto* node = new CUgraphNode_st{hGraph, hGraph->ops.size() - 1};
  d->Register(node);
  *phGraphNode = node;
  return CUDA_SUCCESS;
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuGraphInstantiateWithFlags(CUgraphExec* phGraphExec, CUgraph hGraph, unsigned long long flags) try {
  GPUSLICE_SIM_ENTRY();
  Driver* d = nullptr;
  if (CUresult rc = RequireInit(&d); rc != CUDA_SUCCESS) return rc;
  if (!phGraphExec) return CUDA_ERROR_INVALID_VALUE;
  if (!hGraph || !d->IsRegistered(hGraph)) return CUDA_ERROR_INVALID_HANDLE;
  auto* exec = new CUgraphExec_st();
  exec->context = hGraph->context;
  {
    std::lock_guard<std::mutex> lock(hGraph->mutex);
    exec->ops = hGraph->ops;
  }
  d->Register(exec);
  *phGraphExec = exec;
  return CUDA_SUCCESS;
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuGraphExecDestroy(CUgraphExec hGraphExec) try {
  GPUSLICE_SIM_ENTRY();
  Driver* d = nullptr;
  if (CUresult rc = RequireInit(&d); rc != CUDA_SUCCESS) return rc;
  if (!hGraphExec || !d->IsRegistered(hGraphExec)) return CUDA_ERROR_INVALID_HANDLE;
  d->Unregister(hGraphExec);
  delete hGraphExec;  // its operations were copied into the streams it was launched on
  return CUDA_SUCCESS;
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream) try {
  GPUSLICE_SIM_ENTRY();
  return GraphLaunch(hGraphExec, hStream, false);
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream) try {
  GPUSLICE_SIM_ENTRY();
  return GraphLaunch(hGraphExec, hStream, true);
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuStreamBeginCapture_v2(CUstream hStream, CUstreamCaptureMode mode) try {
  GPUSLICE_SIM_ENTRY();
  return BeginCapture(hStream, false);
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuStreamBeginCapture_v2_ptsz(CUstream hStream, CUstreamCaptureMode mode) try {
  GPUSLICE_SIM_ENTRY();
  return BeginCapture(hStream, true);
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuStreamEndCapture(CUstream hStream, CUgraph* phGraph) try {
  GPUSLICE_SIM_ENTRY();
  return EndCapture(hStream, phGraph, false);
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuStreamEndCapture_ptsz(CUstream hStream, CUgraph* phGraph) try {
  GPUSLICE_SIM_ENTRY();
  return EndCapture(hStream, phGraph, true);
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuStreamIsCapturing(CUstream hStream, CUstreamCaptureStatus* captureStatus) try {
  GPUSLICE_SIM_ENTRY();
  return IsCapturing(hStream, captureStatus, false);
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuStreamIsCapturing_ptsz(CUstream hStream, CUstreamCaptureStatus* captureStatus) try {
  GPUSLICE_SIM_ENTRY();
  return IsCapturing(hStream, captureStatus, true);
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}
