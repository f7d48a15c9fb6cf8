// A latency tenant's priority lease on a GPU (broker/compute_gate.h; docs/scheduling.md, the
// latency class's contract, points 2 and 5). While a lease holds, the GPU's priority flag is set
// and nobody else's launch passes the grant. Two hands move them without a common lock: the
// application's launch takes a lease (and sets the flag if it reads it clear); the process's
// monitor drops a lease it found idle, and any participant's decision clears the flag once no lease
// holds. Each test here is one interleaving of the two that once lost the priority of a request
// just begun: on a simulated GPU, 15-20% of a sweep pair's requests ran part of their way with
// the co-runners launching beside them.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <thread>

#include "broker/broker.h"
#include "broker/compute_gate.h"
#include "broker/segment_layout.h"
#include "common/clock.h"
#include "tests/support/broker_test_names.h"

namespace gpuslice::broker {
namespace {

class BrokerPriorityLeaseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    broker_ = ValueOf(Broker::Attach(dir_.state_dir()));
    ASSERT_NE(broker_, nullptr);
    ASSERT_TRUE(IsOk(broker_->Register("service")));
    const Result<LedgerId> ledger = broker_->OpenLedger(kTestUuid, kTestGpuTotal, kTestGpuTotal);
    ASSERT_TRUE(IsOk(ledger));
    gate_ = std::make_unique<ComputeGate>(broker_.get(), *ledger, broker_->slot().value());
    ASSERT_TRUE(IsOk(gate_->SetShare(30, 100, ComputeClass::kLatency)));
    flag_ = &At(*broker_->segment(), ledger->gpu()).priority;
  }

  uint64_t Lease() { return gate_->published().priority_until_ns.load(); }

  BrokerTempDir dir_;
  std::unique_ptr<Broker> broker_;
  std::unique_ptr<ComputeGate> gate_;
  std::atomic<uint32_t>* flag_ = nullptr;
};

// The monitor read the lease, found the process idle (its last request over, the grace passed)
// and drops it; meanwhile the next request's first launch took a new one. The drop names the lease
// it looked at: the new one stands, and the flag with it.
TEST_F(BrokerPriorityLeaseTest, ADropLeavesTheLeaseALaunchTookSinceTheMonitorLooked) {
  const uint64_t now = MonotonicNanos();
  ASSERT_TRUE(gate_->TakePriority(now));
  const uint64_t looked_at = Lease();
  ASSERT_TRUE(gate_->TakePriority(now + 1000));
  const uint64_t taken = Lease();
  ASSERT_NE(taken, looked_at);

  gate_->DropPriority(looked_at);
  EXPECT_EQ(Lease(), taken) << "the new request's lease was dropped";
  EXPECT_EQ(flag_->load(), 1u);

  gate_->DropPriority(taken);
  EXPECT_EQ(Lease(), 0u);
  EXPECT_EQ(flag_->load(), 0u) << "no lease holds: the others launch again";
}

// The monitor dropped the last request's lease and its decision is about to clear the flag (here
// decisions run on another thread, as another process's would), when the next request's first
// launch takes a lease and reads the flag still set, so leaves it. However the two interleave,
// once the decisions under way have finished the flag is set under the new lease. Without a
// decision's second look after clearing it, it was left clear for the rest of the request.
TEST_F(BrokerPriorityLeaseTest, TheFlagStaysSetUnderALeaseTakenWhileADecisionClearedIt) {
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> decisions{0};
  std::thread decider([&] {
    while (!stop.load()) {
      gate_->Advance(MonotonicNanos());
      decisions.fetch_add(1);
    }
  });
  int cleared_under_lease = 0;
  int rounds = 0;
  for (; rounds < 20'000 && cleared_under_lease == 0; ++rounds) {
    // The monitor's drop without its decision: the decider clears the flag when it next looks.
    gate_->published().priority_until_ns.store(0);
    if (!gate_->TakePriority(MonotonicNanos())) break;
    const uint64_t lease = Lease();
    // Two decisions begun after the take: whichever was under way during it has finished.
    const uint64_t seen = decisions.load();
    while (decisions.load() < seen + 2) {
    }
    // (A lease that expired meanwhile — a descheduled round, under a sanitizer — is cleared rightly.)
    if (flag_->load() == 0 && Lease() == lease && MonotonicNanos() < lease) ++cleared_under_lease;
  }
  stop.store(true);
  decider.join();
  EXPECT_TRUE(rounds >= 20'000 || cleared_under_lease != 0) << "the lease could not be taken";
  EXPECT_EQ(cleared_under_lease, 0) << "in round " << rounds << " the flag was clear under a lease";
}

}  // namespace
}  // namespace gpuslice::broker
