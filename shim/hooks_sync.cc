// The application's synchronisations and queries, which tell the launch trackers for free that
// launches completed (docs/scheduling.md, "Tracking launches by completion"): a
// cuStreamSynchronize that returns, or a cuStreamQuery that answers CUDA_SUCCESS, completes
// every launch counted before on that stream; cuCtxSynchronize every launch of the context; an
// event the application recorded behind its launches (shim/app_events.h) the launches before it.
// Each hook counts what the tracks hold before calling the driver, and applies it once the call
// succeeded. They never start the shim: before its first CUDA call there is nothing to learn.
#include "shim/driver_api.h"  // first: declares every versioned name

#include "common/clock.h"
#include "shim/current_context.h"
#include "shim/hook_entry.h"
#include "shim/real_driver.h"
#include "shim/shim_state.h"

namespace gpuslice::shim {
namespace {

// The stream as tracks are bound to it (shim/stream_track.h): the application's own stream (in
// any context), or a default stream of the current context.
struct StreamKey {
  CUstream handle = nullptr;
  CUcontext context = nullptr;  // nullptr: any (an application stream names one context)
  bool own_only = false;        // the per-thread default stream: only the calling thread's lane
};

StreamKey KeyOf(CUstream stream, bool per_thread, const RealDriver* real) {
  if (stream && stream != CU_STREAM_LEGACY && stream != CU_STREAM_PER_THREAD) return StreamKey{stream, nullptr, false};
  const CUcontext current = CurrentContext::Get(real);
  if (per_thread || stream == CU_STREAM_PER_THREAD) return StreamKey{CU_STREAM_PER_THREAD, current, true};
  return StreamKey{CU_STREAM_LEGACY, current, false};
}

// GPUs one process follows at once in a synchronisation's snapshot.
constexpr int kMaxTrackers = 8;

// Runs `call`, which — when it returns CUDA_SUCCESS — shows complete every launch counted before
// it on the tracks bound to (handle, context). `waits`: it blocks until then (a synchronisation,
// not a query), so pollers leave the calling thread's tracks to it meanwhile.
template <typename Call>
CUresult Learning(CUstream handle, CUcontext context, bool own_only, bool waits, Call call) {
  ShimState* state = ShimState::instance_.load(std::memory_order_acquire);
  if (!state) return call();
  LaunchTracker* trackers[kMaxTrackers];
  LaunchTracker::Snapshot snapshots[kMaxTrackers];
  int count = 0;
  const uint64_t called = MonotonicNanos();
  state->ForEachTrackingTracker([&](LaunchTracker* tracker) {
    if (count == kMaxTrackers) return;
    tracker->TakeSnapshot(handle, context, own_only, waits, called, &snapshots[count]);
    if (snapshots[count].count != 0) trackers[count++] = tracker;
  });
  const CUresult rc = call();
  if (count == 0) return rc;
  const uint64_t returned = MonotonicNanos();
  for (int i = 0; i < count; ++i) trackers[i]->ApplySnapshot(snapshots[i], rc == CUDA_SUCCESS, called, returned);
  return rc;
}

template <typename Call>
CUresult LearningOfStream(CUstream stream, bool per_thread, bool waits, Call call) {
  const StreamKey key = KeyOf(stream, per_thread, Real());
  return Learning(key.handle, key.context, key.own_only, waits, call);
}

// The application recorded `event` on `stream`: it now stands for the calling thread's launches
// on that stream so far.
void NoteRecorded(CUevent event, CUstream stream, bool per_thread) {
  ShimState* state = ShimState::instance_.load(std::memory_order_acquire);
  if (!state) return;
  const StreamKey key = KeyOf(stream, per_thread, Real());
  AppEvents::Mark mark;
  state->ForEachTrackingTracker([&](LaunchTracker* tracker) {
    if (!mark.tracker && tracker->OwnTrack(key.handle, key.context, &mark.item)) mark.tracker = tracker;
  });
  if (mark.tracker) {
    state->app_events().Note(event, mark);
  } else {
    state->app_events().Forget(event);
  }
}

template <typename Call>
CUresult LearningOfEvent(CUevent event, bool waits, Call call) {
  ShimState* state = ShimState::instance_.load(std::memory_order_acquire);
  AppEvents::Mark mark;
  if (!state || !state->app_events().Find(event, &mark)) return call();
  LaunchTracker::Snapshot snapshot;
  snapshot.items[snapshot.count++] = mark.item;
  const uint64_t called = MonotonicNanos();
  if (waits && mark.item.lane == mark.tracker->OwnLane()) {
    mark.item.lane->track(mark.item.track).awaited_since_ns().store(called, std::memory_order_relaxed);
    snapshot.awaits_own = true;
  }
  const CUresult rc = call();
  mark.tracker->ApplySnapshot(snapshot, rc == CUDA_SUCCESS, called, MonotonicNanos());
  return rc;
}

}  // namespace
}  // namespace gpuslice::shim

using gpuslice::shim::CurrentContext;
using gpuslice::shim::Learning;
using gpuslice::shim::LearningOfEvent;
using gpuslice::shim::LearningOfStream;
using gpuslice::shim::NoteRecorded;
using gpuslice::shim::Real;
using gpuslice::shim::ShimState;

CUresult CUDAAPI cuCtxSynchronize() {
  GPUSLICE_REAL_OR_UNSUPPORTED(cuCtxSynchronize)
  return Learning(nullptr, CurrentContext::Get(real), false, true, [&] { return real->cuCtxSynchronize(); });
}

CUresult CUDAAPI cuCtxSynchronize_v2(CUcontext ctx) {
  GPUSLICE_REAL_OR_UNSUPPORTED(cuCtxSynchronize_v2)
  const CUcontext context = ctx ? ctx : CurrentContext::Get(real);
  return Learning(nullptr, context, false, true, [&] { return real->cuCtxSynchronize_v2(ctx); });
}

CUresult CUDAAPI cuStreamSynchronize(CUstream hStream) {
  GPUSLICE_REAL_OR_UNSUPPORTED(cuStreamSynchronize)
  return LearningOfStream(hStream, false, true, [&] { return real->cuStreamSynchronize(hStream); });
}

CUresult CUDAAPI cuStreamSynchronize_ptsz(CUstream hStream) {
  GPUSLICE_REAL_OR_UNSUPPORTED(cuStreamSynchronize_ptsz)
  return LearningOfStream(hStream, true, true, [&] { return real->cuStreamSynchronize_ptsz(hStream); });
}

CUresult CUDAAPI cuStreamQuery(CUstream hStream) {
  GPUSLICE_REAL_OR_UNSUPPORTED(cuStreamQuery)
  return LearningOfStream(hStream, false, false, [&] { return real->cuStreamQuery(hStream); });
}

CUresult CUDAAPI cuStreamQuery_ptsz(CUstream hStream) {
  GPUSLICE_REAL_OR_UNSUPPORTED(cuStreamQuery_ptsz)
  return LearningOfStream(hStream, true, false, [&] { return real->cuStreamQuery_ptsz(hStream); });
}

CUresult CUDAAPI cuEventRecord(CUevent hEvent, CUstream hStream) {
  GPUSLICE_REAL_OR_UNSUPPORTED(cuEventRecord)
  const CUresult rc = real->cuEventRecord(hEvent, hStream);
  if (rc == CUDA_SUCCESS) NoteRecorded(hEvent, hStream, false);
  return rc;
}

CUresult CUDAAPI cuEventRecord_ptsz(CUevent hEvent, CUstream hStream) {
  GPUSLICE_REAL_OR_UNSUPPORTED(cuEventRecord_ptsz)
  const CUresult rc = real->cuEventRecord_ptsz(hEvent, hStream);
  if (rc == CUDA_SUCCESS) NoteRecorded(hEvent, hStream, true);
  return rc;
}

CUresult CUDAAPI cuEventRecordWithFlags(CUevent hEvent, CUstream hStream, unsigned int flags) {
  GPUSLICE_REAL_OR_UNSUPPORTED(cuEventRecordWithFlags)
  const CUresult rc = real->cuEventRecordWithFlags(hEvent, hStream, flags);
  if (rc == CUDA_SUCCESS) NoteRecorded(hEvent, hStream, false);
  return rc;
}

CUresult CUDAAPI cuEventRecordWithFlags_ptsz(CUevent hEvent, CUstream hStream, unsigned int flags) {
  GPUSLICE_REAL_OR_UNSUPPORTED(cuEventRecordWithFlags_ptsz)
  const CUresult rc = real->cuEventRecordWithFlags_ptsz(hEvent, hStream, flags);
  if (rc == CUDA_SUCCESS) NoteRecorded(hEvent, hStream, true);
  return rc;
}

CUresult CUDAAPI cuEventSynchronize(CUevent hEvent) {
  GPUSLICE_REAL_OR_UNSUPPORTED(cuEventSynchronize)
  return LearningOfEvent(hEvent, true, [&] { return real->cuEventSynchronize(hEvent); });
}

CUresult CUDAAPI cuEventQuery(CUevent hEvent) {
  GPUSLICE_REAL_OR_UNSUPPORTED(cuEventQuery)
  return LearningOfEvent(hEvent, false, [&] { return real->cuEventQuery(hEvent); });
}

// A destroyed stream can no longer be asked about; its handle may come back for a stream of
// another context.
CUresult CUDAAPI cuStreamDestroy_v2(CUstream hStream) {
  GPUSLICE_REAL_OR_UNSUPPORTED(cuStreamDestroy_v2)
  ShimState* state = ShimState::instance_.load(std::memory_order_acquire);
  if (!state) return real->cuStreamDestroy_v2(hStream);
  state->ForEachTrackingTracker([&](gpuslice::shim::LaunchTracker* tracker) { tracker->ForgetStream(hStream); });
  const CUresult rc = real->cuStreamDestroy_v2(hStream);
  state->ForgetStreams();
  return rc;
}
