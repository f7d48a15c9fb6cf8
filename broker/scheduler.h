// Compute time-slicing: the GPU is granted to one tenant at a time for a quantum, by weighted
// fair queuing, through state in the broker segment (docs/scheduling.md).
//
// Each process has one ComputeGate per GPU it launches on. Launch hooks call TryEnter/Exit
// around the driver call — a handful of atomic operations on memory the process already has
// cached, no lock, no system call — and Acquire when the gate is shut. A monitor thread per
// process (shim/compute_monitor.cc) calls Monitor to drain its in-flight work when the grant
// must move, and to hand the grant on.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "broker/broker.h"
#include "broker/segment_layout.h"

namespace gpuslice::broker {

inline constexpr uint64_t kDefaultQuantumNs = 10'000'000;
inline constexpr uint32_t kDefaultRequestPct = 10;

class ComputeGate {
 public:
  // For this process's tenant on the GPU of `ledger` (opened with Broker::OpenLedger).
  ComputeGate(Broker* broker, int ledger);
  ComputeGate(const ComputeGate&) = delete;
  ComputeGate& operator=(const ComputeGate&) = delete;

  // Sets (first process of the tenant on this GPU) or checks the tenant's request and limit.
  bool SetShare(uint32_t request_pct, uint32_t limit_pct, std::string* error);

  SharingMode mode() const { return static_cast<SharingMode>(gpu_->mode.load(std::memory_order_relaxed)); }
  bool gated() const { return mode() == SharingMode::kTimeslice; }

  // The fast path. True: the tenant holds the GPU and the caller may launch, then must call
  // Exit. False: the gate is shut; call Acquire and try again.
  bool TryEnter() {
    in_flight_.fetch_add(1);  // announce before looking (seq_cst: see docs/scheduling.md)
    if (Open()) {
      if (busy_->load(std::memory_order_relaxed) == 0) {
        busy_->store(1);
        if (!Open()) {  // the grant moved while we marked ourselves busy: do not launch
          in_flight_.fetch_sub(1);
          return false;
        }
      }
      return true;
    }
    in_flight_.fetch_sub(1);
    return false;
  }
  // After the launch call returned: one more launch submitted, one fewer in the gate.
  void Exit() { in_flight_.fetch_add(kLaunchUnit - 1, std::memory_order_release); }

  // Blocks until this tenant holds the GPU (the slow path).
  void Acquire();

  // One step of the process's monitor: drains and reports idleness when the grant must move,
  // ends an expired or exhausted quantum, hands the grant on. `synchronize` waits for every
  // kernel this process launched on the GPU. Returns how long the monitor may sleep.
  uint64_t Monitor(void (*synchronize)(void* context), void* context);

  // Waits (futex) until the GPU's grant state changes or timeout_ns pass.
  void WaitForChange(uint64_t timeout_ns);

  int gpu_index() const { return gpu_index_; }

 private:
  static constexpr uint64_t kLaunchUnit = 1ULL << 32;  // high half: launches; low half: in the gate

  bool Open() const {
    return gpu_->holder.load() == holder_value_ && gpu_->closing.load() == 0;
  }
  bool HolderIsIdle(uint32_t holder_tenant) const;
  void StartWaiting();
  void StopWaiting();
  // Ends the current grant (charging its holder) and grants the GPU to the next tenant. Call
  // with sched_mutex held.
  void HandOverLocked(uint64_t now);
  int PickNextLocked(uint64_t now, uint64_t* wake_after_ns);
  bool TenantHasLiveProcess(uint32_t tenant) const;
  bool OwedTheGpu(uint32_t holder_tenant, uint64_t held) const;
  void RefillLocked(LedgerEntry& ledger, uint64_t now) const;
  uint64_t QuantumNs() const;
  void Wake();

  Broker* broker_;
  Segment* segment_;
  GpuEntry* gpu_;
  LedgerEntry* ledger_;
  std::atomic<uint32_t>* busy_;
  int gpu_index_;
  int tenant_;
  uint32_t holder_value_;  // tenant + 1
  std::atomic<uint64_t> in_flight_{0};
};

// Policy, for gpuslicectl: the GPU's sharing mode and quantum (0 = the default).
bool SetGpuPolicy(Segment* segment, const uint8_t (&uuid)[16], SharingMode mode, uint64_t quantum_ns,
                  std::string* error);

}  // namespace gpuslice::broker
