// A latency-class tenant's priority on one GPU, this process's side (docs/scheduling.md, the
// latency class's contract): its launches within its request pass the grant, the work they run
// outside the grant is charged as it runs (as a grant's would be), and the priority outlasts the
// work by a grace learnt from the gaps within a request. The shared side — the priority bucket,
// the lease, the charge — is the compute gate's (broker/compute_gate.h).
#pragma once

#include <atomic>
#include <cstdint>

#include "broker/compute_gate.h"
#include "broker/sched_terms.h"

namespace gpuslice::shim {

// The grace a latency tenant's priority outlasts its work by is four times the gaps learnt within
// its requests plus this margin: with no gap learnt (a request launched at once), the margin alone.
// Not the standard class's least idle grace (broker::kMinGraceNs, 200 us): each request holds the
// co-runners off an idle device for its grace, and 200 us after each request of a service of one
// every 2 ms is a tenth of the device.
inline constexpr uint64_t kLatencyGraceMarginNs = 50'000;
// A gap shorter than this is one within a request, learnt even where the grace did not cover it
// (the priority had ended, and the launch took it again): with the grace at its margin, a
// service's first gap within a request comes after its priority ended, and were only gaps the
// grace covered learnt, it would never learn one. A longer gap the grace did not cover is learnt
// too where the grace it teaches is a quarter of the service's gaps between requests or less
// (LatencyPriority::NoteGap).
inline constexpr uint64_t kGapWithinRequestBelowNs = broker::kMinGraceNs;

class LatencyPriority {
 public:
  LatencyPriority(broker::ComputeGate* gate, broker::ProcessGpuState* published) : gate_(gate), published_(published) {}

  // `queued` launches and one more, of `kernel_ns` each, are work the priority bucket holds time
  // for.
  bool WithinBucket(uint32_t queued, uint64_t kernel_ns, uint64_t now) const {
    const int64_t bucket = gate_->PriorityBucketNs(now);
    return bucket > 0 && (queued + 1) * kernel_ns <= static_cast<uint64_t>(bucket);
  }
  // A busy period begins at `now`, with a launch that passed the grant by priority or not. Its
  // first `wait_allowance_ns` beside others' work are not charged (ChargeUpTo). `beside`: the
  // other processes with work in flight as it began, what its request waits behind — counted
  // beside it up to its first charge, whatever the charge finds then: by the end of a short
  // request the co-runners, held off by its priority, have mostly nothing in flight, and a count
  // taken only then charged the wait behind their kernel as the service's own work (a service
  // using 19% of the device on a request of 28 was charged for 34%, and lost its priority).
  void BeginBusyPeriod(uint64_t now, bool priority, uint64_t wait_allowance_ns, uint32_t beside) {
    charged_ns_.store(now, std::memory_order_relaxed);
    wait_allowance_ns_.store(wait_allowance_ns, std::memory_order_relaxed);
    beside_at_begin_.store(beside, std::memory_order_relaxed);
    busy_.store(priority, std::memory_order_relaxed);
  }
  // Priority taken again within a busy period (its bucket refilled): charged from here. Not
  // charged, the bucket refilled to full and the tenant passed the grant for good.
  void TakenWithinBusyPeriod(uint64_t now) {
    if (busy_.load(std::memory_order_relaxed)) return;
    charged_ns_.store(now, std::memory_order_relaxed);
    busy_.store(true, std::memory_order_relaxed);
  }
  // A priority launch came `gap` after the process's last launch completed.
  void NoteGap(uint64_t gap);
  // How long the priority outlasts the work (what NoteGap has learnt).
  uint64_t grace_ns() const { return grace_ns_.load(std::memory_order_relaxed); }
  // The busy period ended at `completed_ns`: its priority work is charged by the monitor (Update),
  // not here, where an application thread returns from its synchronisation.
  void EndBusyPeriod(uint64_t completed_ns) {
    if (busy_.exchange(false, std::memory_order_relaxed)) charge_due_ns_.store(completed_ns, std::memory_order_release);
  }
  // The monitor's step: charges the priority work, renews or drops the priority.
  void Update(uint64_t now);
  // How long from `now` until the priority, held with no work in flight, has outlasted its grace
  // (contract, point 5): the monitor looks again then, not at its next ordinary step, for each
  // step's lag past the grace holds the co-runners off an idle device. UINT64_MAX when no grace
  // is running (no priority held, or work in flight: its completion starts the grace).
  uint64_t UntilGraceEndsNs(uint64_t now) const;

 private:
  void ChargeUpTo(uint64_t now);

  broker::ComputeGate* gate_;
  broker::ProcessGpuState* published_;
  // A latency tenant's gaps within a request (a launch while its priority still held), their
  // EWMA, and the grace its priority lasts after its work (Update).
  std::atomic<uint64_t> gap_ns_{0};
  std::atomic<uint64_t> between_ns_{0};  // the EWMA of its gaps between requests
  std::atomic<uint64_t> grace_ns_{kLatencyGraceMarginNs};
  std::atomic<bool> busy_{false};               // the current busy period began with a priority launch
  std::atomic<uint64_t> charged_ns_{0};         // its priority work is charged up to here
  std::atomic<uint64_t> charge_due_ns_{0};      // a finished busy period's, for the monitor to charge
  std::atomic<uint64_t> wait_allowance_ns_{0};  // of its busy period's wait, not charged
  std::atomic<uint32_t> beside_at_begin_{0};    // others' processes with work as it began, until charged
};

}  // namespace gpuslice::shim
