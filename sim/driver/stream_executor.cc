#include "stream_executor.h"

#include <sys/prctl.h>

#include "common/clock.h"
#include "device_runner.h"

namespace gpuslice::sim {

StreamExecutor::StreamExecutor(DeviceRunner* runner) : runner_(runner) {}

StreamExecutor::~StreamExecutor() {
  {
    std::unique_lock<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  work_cv_.notify_all();
  if (worker_.joinable()) worker_.join();
}

void StreamExecutor::Enqueue(StreamOp op) {
  if (op.kind == StreamOp::Kind::kKernel) runner_->KernelQueued();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(std::move(op));
    ++submitted_;
    if (!worker_.joinable()) worker_ = std::thread([this] { WorkerLoop(); });
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
    Execute(op);
    lock.lock();
    ++completed_;
    drained_cv_.notify_all();
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
