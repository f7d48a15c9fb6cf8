#include "stream_executor.h"

#include <cxxabi.h>
#include <sys/prctl.h>

#include <algorithm>
#include <chrono>
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
  op.queued_ns = MonotonicNanos();
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
  uint64_t end_ns = 0;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    const uint64_t target = submitted_;
    drained_cv_.wait(lock, [&] { return completed_ >= target; });
    end_ns = end_ns_;
  }
  // Spun at the end, as the real driver spin-waits a synchronisation by default.
  SleepUntilNanos(end_ns);
}

bool StreamExecutor::Idle() {
  std::lock_guard<std::mutex> lock(mutex_);
  return completed_ == submitted_ && MonotonicNanos() >= end_ns_;
}

void StreamExecutor::WorkerLoop() {
  // Timer slack would make the device's hand-over late by ~50 us.
  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    if (queue_.empty() && pending_release_ns_ != 0) {
      // The device works through this stream's last kernel until pending_release_ns_: new work
      // arriving before then continues the timeline; none, and the device is given back at the
      // exact end (the last stretch spun, in SettleDevice).
      const uint64_t wake = pending_release_ns_ > kSpinTailNs ? pending_release_ns_ - kSpinTailNs : 0;
      const std::chrono::steady_clock::time_point deadline{std::chrono::nanoseconds(wake)};
      work_cv_.wait_until(lock, deadline, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) {
        lock.unlock();
        SettleDevice();
        lock.lock();
      }
      continue;
    }
    work_cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping with nothing left
    StreamOp op = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    uint64_t end_ns = 0;
    try {
      end_ns = Execute(op);
    } catch (abi::__forced_unwind&) {
      throw;  // the thread is cancelled: it must unwind
    } catch (const std::exception& e) {
      Failed(e.what());
    } catch (...) {
      Failed("an exception of unknown type");
    }
    lock.lock();
    end_ns_ = std::max(end_ns_, end_ns != 0 ? end_ns : MonotonicNanos());  // 0: it failed, now
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

uint64_t StreamExecutor::Execute(StreamOp& op) {
  switch (op.kind) {
    case StreamOp::Kind::kKernel:
      pending_release_ns_ =
          runner_->RunKernel(op.kernel_ns, op.blocks, op.threads_per_block, std::max(end_ns_, op.queued_ns));
      return pending_release_ns_;
    case StreamOp::Kind::kHostWork:
      SleepUntilNanos(end_ns_);  // after the stream's kernels, in real time
      SettleDevice();
      if (op.work) op.work();
      return MonotonicNanos();
    case StreamOp::Kind::kRecordEvent: {
      // The stream's work before the record ends at end_ns_; an idle stream reaches it at once.
      const uint64_t at = std::max(end_ns_, op.queued_ns);
      CompleteEvent(op.event, op.event_record, at);
      return at;
    }
    case StreamOp::Kind::kWaitEvent: return WaitEvent(op);
  }
  return MonotonicNanos();
}

uint64_t StreamExecutor::WaitEvent(const StreamOp& op) {
  std::unique_lock<std::mutex> lock(op.event->mutex);
  if (op.event->completed < op.event_record) {
    // Blocked for as long as other work takes: the device is not held meanwhile.
    lock.unlock();
    SettleDevice();
    lock.lock();
    op.event->completed_cv.wait(lock, [&] { return op.event->completed >= op.event_record; });
  }
  // Later work of this stream starts when the event's work has ended on the device.
  return std::max(end_ns_, op.event->completed_ns);
}

void StreamExecutor::SettleDevice() {
  if (pending_release_ns_ == 0) return;
  runner_->ReleaseIfIdle(pending_release_ns_);
  pending_release_ns_ = 0;
}

void CompleteEvent(CUevent_st* event, uint64_t record, uint64_t completed_ns) {
  {
    std::lock_guard<std::mutex> lock(event->mutex);
    if (record > event->completed) {
      event->completed = record;
      event->completed_ns = completed_ns;
    }
  }
  event->completed_cv.notify_all();
}

}  // namespace gpuslice::sim
