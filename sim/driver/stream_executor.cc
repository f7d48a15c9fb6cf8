#include "stream_executor.h"

#include <cxxabi.h>
#include <sys/prctl.h>

#include <cstdio>
#include <exception>

#include "common/clock.h"
#include "device_runner.h"

namespace gpuslice::sim {

StreamExecutor::StreamExecutor(DeviceRunner* runner, std::shared_ptr<std::atomic<int>> sticky_error)
    : runner_(runner), sticky_error_(std::move(sticky_error)) {}

StreamExecutor::~StreamExecutor() {
  {
    std::unique_lock<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  work_cv_.notify_all();
  if (worker_.joinable()) worker_.join();
}

void StreamExecutor::Enqueue(StreamOp op) {
  const bool kernel = op.kind == StreamOp::Kind::kKernel;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    // Both may throw; nothing is queued or counted until both have succeeded.
    if (!worker_.joinable()) worker_ = std::thread([this] { WorkerLoop(); });
    queue_.push_back(std::move(op));
    // Before the worker can take it (it needs the lock): the kernel is counted before it runs.
    if (kernel) runner_->KernelQueued();
    ++submitted_;
  }
  work_cv_.notify_one();
}

void StreamExecutor::Synchronize() {
  std::unique_lock<std::mutex> lock(mutex_);
  const uint64_t target = submitted_;
  drained_cv_.wait(lock, [&] { return completed_ >= target; });
}

bool StreamExecutor::Idle() {
  std::lock_guard<std::mutex> lock(mutex_);
  return completed_ == submitted_;
}

void StreamExecutor::WorkerLoop() {
  // Timer slack would stretch every simulated kernel by ~50 us.
  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    work_cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping with nothing left
    StreamOp op = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    try {
      Execute(op);
    } catch (abi::__forced_unwind&) {
      throw;  // the thread is cancelled: it must unwind
    } catch (const std::exception& e) {
      Failed(e.what());
    } catch (...) {
      Failed("an exception of unknown type");
    }
    lock.lock();
    ++completed_;
    drained_cv_.notify_all();
  }
}

void StreamExecutor::Failed(const char* why) {
  int none = 0;
  if (sticky_error_->compare_exchange_strong(none, CUDA_ERROR_LAUNCH_FAILED)) {
    std::fprintf(stderr,
                 "gpuslice-sim: work on a stream failed (%s); its context fails with CUDA_ERROR_LAUNCH_FAILED\n", why);
  }
}

void StreamExecutor::Execute(StreamOp& op) {
  switch (op.kind) {
    case StreamOp::Kind::kKernel: runner_->RunKernel(op.kernel_ns, op.blocks, op.threads_per_block); break;
    case StreamOp::Kind::kHostWork:
      if (op.work) op.work();
      break;
    case StreamOp::Kind::kRecordEvent: CompleteEvent(op.event, op.event_record); break;
    case StreamOp::Kind::kWaitEvent: {
      std::unique_lock<std::mutex> lock(op.event->mutex);
      op.event->completed_cv.wait(lock, [&] { return op.event->completed >= op.event_record; });
      break;
    }
  }
}

void CompleteEvent(CUevent_st* event, uint64_t record) {
  {
    std::lock_guard<std::mutex> lock(event->mutex);
    if (record > event->completed) {
      event->completed = record;
      event->completed_ns = MonotonicNanos();
    }
  }
  event->completed_cv.notify_all();
}

}  // namespace gpuslice::sim
