// Streams and events: asynchronous, in-order execution with completion tracking.
#include "driver_api.h"

#include <memory>

#include "common/clock.h"
#include "device_runner.h"
#include "driver_state.h"
#include "memory_pool.h"

namespace gpuslice::sim {
namespace {

CUresult StreamSynchronize(CUstream hStream, bool per_thread) {
  CUstream_st* s = nullptr;
  if (CUresult rc = ResolveStream(hStream, per_thread, &s); rc != CUDA_SUCCESS) return rc;
  s->executor->Synchronize();
  TrimPoolsAtSynchronize(s->context->device);
  return Driver::Get()->ContextError(s->context);
}

CUresult StreamQuery(CUstream hStream, bool per_thread) {
  CUstream_st* s = nullptr;
  if (CUresult rc = ResolveStream(hStream, per_thread, &s); rc != CUDA_SUCCESS) return rc;
  return s->executor->Idle() ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

CUresult ValidEvent(CUevent e) {
  Driver* d = nullptr;
  if (CUresult rc = RequireInit(&d); rc != CUDA_SUCCESS) return rc;
  return (e && d->IsRegistered(e)) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

// The event's last recording has completed and the device has reached its time.
bool EventDoneLocked(const CUevent_st* e, uint64_t now) {
  return e->completed >= e->recorded && now >= e->completed_ns;
}

bool EventDone(CUevent_st* e) {
  std::lock_guard<std::mutex> lock(e->mutex);
  return EventDoneLocked(e, MonotonicNanos());
}

CUresult EventRecord(CUevent hEvent, CUstream hStream, bool per_thread) {
  if (CUresult rc = ValidEvent(hEvent); rc != CUDA_SUCCESS) return rc;
  CUstream_st* s = nullptr;
  if (CUresult rc = ResolveStream(hStream, per_thread, &s); rc != CUDA_SUCCESS) return rc;
  StreamOp op;
  op.kind = StreamOp::Kind::kRecordEvent;
  op.event = hEvent;
  {
    std::lock_guard<std::mutex> lock(hEvent->mutex);
    op.event_record = ++hEvent->recorded;
  }
  const uint64_t record = op.event_record;
  try {
    s->executor->Enqueue(std::move(op));
  } catch (...) {  // not queued: nobody may wait for this recording
    bool undone = false;
    {
      std::lock_guard<std::mutex> lock(hEvent->mutex);
      if (hEvent->recorded == record) --hEvent->recorded, undone = true;
    }
    if (!undone) CompleteEvent(hEvent, record, MonotonicNanos());  // recorded again meanwhile: this one counts as done
    throw;
  }
  return CUDA_SUCCESS;
}

CUresult StreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int flags, bool per_thread) {
  if (CUresult rc = ValidEvent(hEvent); rc != CUDA_SUCCESS) return rc;
  CUstream_st* s = nullptr;
  if (CUresult rc = ResolveStream(hStream, per_thread, &s); rc != CUDA_SUCCESS) return rc;
  StreamOp op;
  op.kind = StreamOp::Kind::kWaitEvent;
  op.event = hEvent;
  {
    std::lock_guard<std::mutex> lock(hEvent->mutex);
    op.event_record = hEvent->recorded;  // waits for the most recent recording, as documented
  }
  if (op.event_record == 0) return CUDA_SUCCESS;  // never recorded: nothing to wait for
  s->executor->Enqueue(std::move(op));
  return CUDA_SUCCESS;
}

CUresult LaunchHostFunc(CUstream hStream, CUhostFn fn, void* userData, bool per_thread) {
  if (!fn) return CUDA_ERROR_INVALID_VALUE;
  CUstream_st* s = nullptr;
  if (CUresult rc = ResolveStream(hStream, per_thread, &s); rc != CUDA_SUCCESS) return rc;
  StreamOp op;
  op.kind = StreamOp::Kind::kHostWork;
  op.work = [fn, userData] { fn(userData); };
  s->executor->Enqueue(std::move(op));
  return CUDA_SUCCESS;
}

CUresult StreamGetCtx(CUstream hStream, CUcontext* pctx, bool per_thread) {
  if (!pctx) return CUDA_ERROR_INVALID_VALUE;
  CUstream_st* s = nullptr;
  if (CUresult rc = ResolveStream(hStream, per_thread, &s); rc != CUDA_SUCCESS) return rc;
  *pctx = s->context;
  return CUDA_SUCCESS;
}

}  // namespace
}  // namespace gpuslice::sim

using namespace gpuslice::sim;

CUresult CUDAAPI cuStreamCreate(CUstream* phStream, unsigned int Flags) try {
  GPUSLICE_SIM_ENTRY();
  Driver* d = nullptr;
  CUctx_st* ctx = nullptr;
  if (CUresult rc = RequireContext(&d, &ctx); rc != CUDA_SUCCESS) return rc;
  if (!phStream || (Flags & ~static_cast<unsigned>(CU_STREAM_NON_BLOCKING)) != 0) return CUDA_ERROR_INVALID_VALUE;
  *phStream = d->CreateStream(ctx, Flags, 0);
  return CUDA_SUCCESS;
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuStreamCreateWithPriority(CUstream* phStream, unsigned int flags, int priority) try {
  GPUSLICE_SIM_ENTRY();
  CUresult rc = cuStreamCreate(phStream, flags);
  if (rc == CUDA_SUCCESS) (*phStream)->priority = priority;
  return rc;
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuStreamDestroy_v2(CUstream hStream) try {
  GPUSLICE_SIM_ENTRY();
  Driver* d = nullptr;
  if (CUresult rc = RequireInit(&d); rc != CUDA_SUCCESS) return rc;
  if (!hStream || hStream == CU_STREAM_LEGACY || hStream == CU_STREAM_PER_THREAD || !d->IsRegistered(hStream) ||
      hStream == hStream->context->legacy_stream)
    return CUDA_ERROR_INVALID_HANDLE;
  d->DestroyStream(hStream);
  return CUDA_SUCCESS;
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuStreamSynchronize(CUstream hStream) try {
  GPUSLICE_SIM_ENTRY();
  return StreamSynchronize(hStream, false);
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}
CUresult CUDAAPI cuStreamSynchronize_ptsz(CUstream hStream) try {
  GPUSLICE_SIM_ENTRY();
  return StreamSynchronize(hStream, true);
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}
CUresult CUDAAPI cuStreamQuery(CUstream hStream) try {
  GPUSLICE_SIM_ENTRY();
  return StreamQuery(hStream, false);
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}
CUresult CUDAAPI cuStreamQuery_ptsz(CUstream hStream) try {
  GPUSLICE_SIM_ENTRY();
  return StreamQuery(hStream, true);
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}
CUresult CUDAAPI cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags) try {
  GPUSLICE_SIM_ENTRY();
  return StreamWaitEvent(hStream, hEvent, Flags, false);
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}
CUresult CUDAAPI cuStreamWaitEvent_ptsz(CUstream hStream, CUevent hEvent, unsigned int Flags) try {
  GPUSLICE_SIM_ENTRY();
  return StreamWaitEvent(hStream, hEvent, Flags, true);
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}
CUresult CUDAAPI cuStreamGetCtx(CUstream hStream, CUcontext* pctx) try {
  GPUSLICE_SIM_ENTRY();
  return StreamGetCtx(hStream, pctx, false);
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}
CUresult CUDAAPI cuStreamGetCtx_ptsz(CUstream hStream, CUcontext* pctx) try {
  GPUSLICE_SIM_ENTRY();
  return StreamGetCtx(hStream, pctx, true);
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuStreamGetFlags(CUstream hStream, unsigned int* flags) try {
  GPUSLICE_SIM_ENTRY();
  CUstream_st* s = nullptr;
  if (CUresult rc = ResolveStream(hStream, false, &s); rc != CUDA_SUCCESS) return rc;
  if (!flags) return CUDA_ERROR_INVALID_VALUE;
  *flags = s->flags;
  return CUDA_SUCCESS;
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuLaunchHostFunc(CUstream hStream, CUhostFn fn, void* userData) try {
  GPUSLICE_SIM_ENTRY();
  return LaunchHostFunc(hStream, fn, userData, false);
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}
CUresult CUDAAPI cuLaunchHostFunc_ptsz(CUstream hStream, CUhostFn fn, void* userData) try {
  GPUSLICE_SIM_ENTRY();
  return LaunchHostFunc(hStream, fn, userData, true);
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuEventCreate(CUevent* phEvent, unsigned int Flags) try {
  GPUSLICE_SIM_ENTRY();
  Driver* d = nullptr;
  CUctx_st* ctx = nullptr;
  if (CUresult rc = RequireContext(&d, &ctx); rc != CUDA_SUCCESS) return rc;
  constexpr unsigned kKnown = CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS;
  if (!phEvent || (Flags & ~kKnown) != 0) return CUDA_ERROR_INVALID_VALUE;
  auto e = std::make_unique<CUevent_st>();
  e->context = ctx;
  e->flags = Flags;
  d->Register(e.get());
  *phEvent = e.release();
  return CUDA_SUCCESS;
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuEventDestroy_v2(CUevent hEvent) try {
  GPUSLICE_SIM_ENTRY();
  if (CUresult rc = ValidEvent(hEvent); rc != CUDA_SUCCESS) return rc;
  Driver::Get()->Unregister(hEvent);
  // Work already queued may still complete the event: its memory is kept (a few bytes)
  // rather than risk a worker writing to freed memory.
  return CUDA_SUCCESS;
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuEventRecord(CUevent hEvent, CUstream hStream) try {
  GPUSLICE_SIM_ENTRY();
  return EventRecord(hEvent, hStream, false);
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}
CUresult CUDAAPI cuEventRecord_ptsz(CUevent hEvent, CUstream hStream) try {
  GPUSLICE_SIM_ENTRY();
  return EventRecord(hEvent, hStream, true);
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}
CUresult CUDAAPI cuEventRecordWithFlags(CUevent hEvent, CUstream hStream, unsigned int flags) try {
  GPUSLICE_SIM_ENTRY();
  return EventRecord(hEvent, hStream, false);
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}
CUresult CUDAAPI cuEventRecordWithFlags_ptsz(CUevent hEvent, CUstream hStream, unsigned int flags) try {
  GPUSLICE_SIM_ENTRY();
  return EventRecord(hEvent, hStream, true);
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuEventQuery(CUevent hEvent) try {
  GPUSLICE_SIM_ENTRY();
  if (CUresult rc = ValidEvent(hEvent); rc != CUDA_SUCCESS) return rc;
  return EventDone(hEvent) ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuEventSynchronize(CUevent hEvent) try {
  GPUSLICE_SIM_ENTRY();
  if (CUresult rc = ValidEvent(hEvent); rc != CUDA_SUCCESS) return rc;
  uint64_t completed_ns = 0;
  {
    std::unique_lock<std::mutex> lock(hEvent->mutex);
    const uint64_t target = hEvent->recorded;
    hEvent->completed_cv.wait(lock, [&] { return hEvent->completed >= target; });
    completed_ns = hEvent->completed_ns;
  }
  // Its work ends on the device at completed_ns; spun at the end, as the real driver spin-waits.
  SleepUntilNanos(completed_ns);
  TrimPoolsAtSynchronize(hEvent->context->device);
  return Driver::Get()->ContextError(hEvent->context);
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuEventElapsedTime_v2(float* pMilliseconds, CUevent hStart, CUevent hEnd) try {
  GPUSLICE_SIM_ENTRY();
  if (CUresult rc = ValidEvent(hStart); rc != CUDA_SUCCESS) return rc;
  if (CUresult rc = ValidEvent(hEnd); rc != CUDA_SUCCESS) return rc;
  if (!pMilliseconds) return CUDA_ERROR_INVALID_VALUE;
  if ((hStart->flags | hEnd->flags) & CU_EVENT_DISABLE_TIMING) return CUDA_ERROR_INVALID_HANDLE;
  if (hStart == hEnd) {
    std::lock_guard<std::mutex> lock(hStart->mutex);
    if (hStart->recorded == 0) return CUDA_ERROR_INVALID_HANDLE;
    if (!EventDoneLocked(hStart, gpuslice::MonotonicNanos())) return CUDA_ERROR_NOT_READY;
    *pMilliseconds = 0.0f;
    return CUDA_SUCCESS;
  }
  std::scoped_lock lock(hStart->mutex, hEnd->mutex);
  if (hStart->recorded == 0 || hEnd->recorded == 0) return CUDA_ERROR_INVALID_HANDLE;
  const uint64_t now = gpuslice::MonotonicNanos();
  if (!EventDoneLocked(hStart, now) || !EventDoneLocked(hEnd, now)) return CUDA_ERROR_NOT_READY;
  *pMilliseconds =
      static_cast<float>(static_cast<double>(static_cast<int64_t>(hEnd->completed_ns - hStart->completed_ns)) / 1e6);
  return CUDA_SUCCESS;
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuEventElapsedTime(float* pMilliseconds, CUevent hStart, CUevent hEnd) try {
  GPUSLICE_SIM_ENTRY();
  return cuEventElapsedTime_v2(pMilliseconds, hStart, hEnd);
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}
