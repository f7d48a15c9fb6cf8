// Sharing mode mps: launches are not gated, and the tenant's limits reach the MPS client through
// its environment before the driver initialises.
#include <gtest/gtest.h>

#include "broker/broker.h"
#include "broker/scheduler.h"
#include "broker/snapshot.h"
#include "broker/uuid.h"
#include "tests/support/shim_fixture.h"

namespace gpuslice::testing {
namespace {

class ShimMpsModeTest : public ShimTest {
 protected:
  // Makes the simulated GPU known to the broker (a first tenant uses it), then sets its mode.
  void SetMode(broker::SharingMode mode) {
    ASSERT_EQ(RunShimmed({App("direct"), "alloc", "--chunk", "1Mi"}).exit_code, 0);
    std::string error;
    Result<std::unique_ptr<broker::Broker>> existing = broker::Broker::AttachExisting(state_dir());
    ASSERT_TRUE(existing.ok()) << existing.message();
    const std::unique_ptr<broker::Broker> attached = std::move(existing).value();
    const auto snapshot = BrokerSnapshot();
    ASSERT_EQ(snapshot.gpus.size(), 1u);
    uint8_t uuid[16];
    ASSERT_TRUE(broker::ParseUuid(snapshot.gpus[0].uuid, uuid));
    const Status set = broker::SetGpuPolicy(attached->segment(), uuid, mode, 0);
    ASSERT_TRUE(set.ok()) << set.message();
  }
};

TEST_F(ShimMpsModeTest, LimitsArePassedToMpsBeforeTheDriverInitialises) {
  SetMode(broker::SharingMode::kMps);
  const ProcessResult r = RunShimmed({App("direct"), "alloc", "--chunk", "1Mi"},
                                     {"GPUSLICE_COMPUTE_REQUEST=20", "GPUSLICE_COMPUTE_LIMIT=40",
                                      "GPUSLICE_MEMORY_LIMIT=2Gi", "GPUSLICE_MEMORY_LIMIT_1=1Gi"});
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  const auto result = EventOf(r.out, "result");
  EXPECT_EQ(result.value("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", ""), "40") << r.out;
  const std::string pinned = result.value("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "");
  EXPECT_EQ(pinned.rfind("0=2048M,1=1024M,2=2048M", 0), 0u) << r.out;
}

TEST_F(ShimMpsModeTest, OtherModesLeaveTheEnvironmentAlone) {
  SetMode(broker::SharingMode::kNone);
  const ProcessResult r = RunShimmed({App("direct"), "alloc", "--chunk", "1Mi"},
                                     {"GPUSLICE_COMPUTE_LIMIT=40", "GPUSLICE_MEMORY_LIMIT=2Gi"});
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_EQ(r.out.find("CUDA_MPS_"), std::string::npos) << r.out;
}

TEST_F(ShimMpsModeTest, ValuesTheProcessSetItselfWin) {
  SetMode(broker::SharingMode::kMps);
  const ProcessResult r = RunShimmed({App("direct"), "alloc", "--chunk", "1Mi"},
                                     {"GPUSLICE_COMPUTE_LIMIT=40", "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=70"});
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_EQ(EventOf(r.out, "result").value("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", ""), "70") << r.out;
}

}  // namespace
}  // namespace gpuslice::testing
