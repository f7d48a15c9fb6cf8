// Executes one stream's work in order on a worker thread, so that launches and async copies
// return at once and complete later, as on a GPU. Work that fails there (a host function that
// throws, memory exhausted in a copy) breaks the stream's context, as a fault on a GPU does: its
// sticky error becomes CUDA_ERROR_LAUNCH_FAILED, and the worker goes on.
//
// Completion is a time, not the moment the worker gets past an op: a kernel is scheduled on the
// device's timeline (DeviceRunner) and complete from the time it ends there, which may be ahead
// of the worker. So the stream keeps the time its last completed op ends (`end_ns_`):
// synchronisations and queries wait for that time, events complete at it, and host work (copies,
// host functions) waits for it before running, so that it still follows the stream's kernels in
// real time.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "handles.h"

namespace gpuslice::sim {

class DeviceRunner;

struct StreamOp {
  enum class Kind { kKernel, kHostWork, kRecordEvent, kWaitEvent };
  Kind kind = Kind::kHostWork;
  uint64_t kernel_ns = 0;          // kKernel: one wave's time (work_model.h)
  uint64_t blocks = 1;             // kKernel: grid size; 1 for kernels that are not spin_ns
  uint32_t threads_per_block = 1;  // kKernel
  std::function<void()> work;      // kHostWork: copies, memsets, host functions, async frees
  CUevent_st* event = nullptr;     // kRecordEvent / kWaitEvent
  uint64_t event_record = 0;       // which recording of the event
  // When it was queued (Enqueue): the device could take it from then, however late the worker
  // gets to it, so a worker the host's scheduler delays does not leave the device idle.
  uint64_t queued_ns = 0;
};

class StreamExecutor {
 public:
  // `sticky_error`: the context's (CUctx_st::sticky_error), shared: the worker may outlive it.
  StreamExecutor(DeviceRunner* runner, std::shared_ptr<std::atomic<int>> sticky_error);
  ~StreamExecutor();  // finishes queued work, then stops the worker
  StreamExecutor(const StreamExecutor&) = delete;
  StreamExecutor& operator=(const StreamExecutor&) = delete;

  // Throws, having queued nothing, when the op cannot be queued (memory, a worker thread the
  // system refuses): the entry point's handler turns that into its error code.
  void Enqueue(StreamOp op);
  // Blocks until everything enqueued so far has completed.
  void Synchronize();
  // True when everything enqueued so far has completed.
  bool Idle();

 private:
  void WorkerLoop();
  // Runs or schedules `op`; returns the time it completes.
  uint64_t Execute(StreamOp& op);
  uint64_t WaitEvent(const StreamOp& op);
  // This stream will give the device nothing more for now: gives it back once its last kernel
  // ends, if the process has nothing else for it (DeviceRunner::ReleaseIfIdle).
  void SettleDevice();
  // `op` threw: the context's sticky error, set once, with one line saying why.
  void Failed(const char* why);

  DeviceRunner* runner_;
  const std::shared_ptr<std::atomic<int>> sticky_error_;
  std::mutex mutex_;
  std::condition_variable work_cv_;
  std::condition_variable drained_cv_;
  std::deque<StreamOp> queue_;
  uint64_t submitted_ = 0;
  uint64_t completed_ = 0;
  // When the last completed op ends (guarded by mutex_; written only by the worker).
  uint64_t end_ns_ = 0;
  // Worker only: the end of this stream's last kernel while the device may still be held for it.
  uint64_t pending_release_ns_ = 0;
  bool stopping_ = false;
  std::thread worker_;  // started at the first Enqueue: idle streams cost no thread
};

// Marks the event's `record`-th recording complete as of `completed_ns` (it reads as complete
// from then) and wakes its waiters.
void CompleteEvent(CUevent_st* event, uint64_t record, uint64_t completed_ns);

}  // namespace gpuslice::sim
