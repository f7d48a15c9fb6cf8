// A memory request is guaranteed and a limit is a ceiling (docs/accounting.md, "Requests and
// limits"): a tenant may borrow beyond its request, up to its limit, only memory that no other
// tenant's request reserves; within its request it is never refused for others' sake; requests
// together never exceed the GPU; and a tenant whose request borrowers hold is refused with a line
// naming them, until they give the memory back. Without requests, nothing changes: a tenant is
// held to its limit and the device's own capacity, as before requests existed.
//
// Every case runs real preloaded processes on one simulated 4 GiB GPU, in 256 MiB chunks.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "broker/snapshot.h"
#include "tests/support/shim_fixture.h"

namespace gpuslice::testing {
namespace {

using ::testing::HasSubstr;

class ShimMemoryRequestTest : public ShimTest {
 protected:
  void SetUp() override {
    ShimTest::SetUp();
    SetEnv("GPUSLICE_SIM_MEMORY", "4Gi");
  }

  // Asks for `count` 256 MiB chunks as tenant `tenant` with `env`, and returns its result.
  ProcessResult Ask(const std::string& tenant, int count, std::vector<std::string> env) {
    env.push_back("GPUSLICE_TENANT=" + tenant);
    return RunShimmed({App("direct"), "alloc", "--chunk", "256Mi", "--count", std::to_string(count)}, env);
  }

  std::unique_ptr<Subprocess> Hold(const std::string& tenant, int count, std::vector<std::string> env) {
    env.push_back("GPUSLICE_TENANT=" + tenant);
    return StartHolder({App("direct"), "alloc", "--chunk", "256Mi", "--count", std::to_string(count)}, env);
  }

  const broker::TenantView* Find(const broker::Snapshot& snapshot, const std::string& tenant) {
    for (const auto& gpu : snapshot.gpus)
      for (const auto& t : gpu.tenants)
        if (t.name == tenant) return &t;
    return nullptr;
  }
};

// B holds a request of 2 GiB while using 512 MiB: A (request 1 GiB, limit 4 GiB) gets its own
// 1 GiB and borrows the 1 GiB nobody's request reserves, and no more.
TEST_F(ShimMemoryRequestTest, ABorrowerGetsOnlyWhatNoOtherRequestReserves) {
  auto b = Hold("b", 2, {"GPUSLICE_MEMORY_REQUEST=2Gi"});
  const ProcessResult a = Ask("a", 16, {"GPUSLICE_MEMORY_REQUEST=1Gi", "GPUSLICE_MEMORY_LIMIT=4Gi"});
  ASSERT_EQ(a.exit_code, 0) << Describe(a);
  EXPECT_EQ(ResultOf(a).value("allocated", -1), 8) << "2 GiB: 4 GiB less b's request" << a.out;
  EXPECT_EQ(ResultOf(a)["refusals"].value("CUDA_ERROR_OUT_OF_MEMORY", 0), 8) << a.out;
  EXPECT_EQ(ResultOf(a)["mem_before"].value("total", uint64_t{0}), 4 * kGi) << "total: the limit";
  EXPECT_EQ(ResultOf(a)["mem_before"].value("free", uint64_t{0}), 2 * kGi) << "free: what it may take" << a.out;
  // B, within its request, is never refused: its request stayed its own while A borrowed.
  const ProcessResult b_more = Ask("b", 6, {"GPUSLICE_MEMORY_REQUEST=2Gi"});
  EXPECT_EQ(ResultOf(b_more).value("allocated", -1), 6) << b_more.out;
  EXPECT_EQ(Stop(*b).exit_code, 0);
}

// The control: the same B without a request reserves nothing, and A takes all the device has.
TEST_F(ShimMemoryRequestTest, WithoutRequestsOnlyTheLimitAndTheDeviceBindAsBefore) {
  auto b = Hold("b", 2, {"GPUSLICE_MEMORY_LIMIT=2Gi"});
  const ProcessResult a = Ask("a", 16, {"GPUSLICE_MEMORY_LIMIT=4Gi"});
  ASSERT_EQ(a.exit_code, 0) << Describe(a);
  EXPECT_EQ(ResultOf(a).value("allocated", -1), 14) << "3.5 GiB: all the device has left" << a.out;
  EXPECT_EQ(Stop(*b).exit_code, 0);
}

// A bursts to its limit while nobody else holds a request; its borrowed bytes show as such.
TEST_F(ShimMemoryRequestTest, ABurstStopsAtTheLimitAndShowsAsBorrowed) {
  auto a = Hold("a", 16, {"GPUSLICE_MEMORY_REQUEST=1Gi", "GPUSLICE_MEMORY_LIMIT=3Gi"});
  EXPECT_EQ(EventOf(a->StdoutSoFar(), "holding").value("allocated", -1), 12) << a->StdoutSoFar();
  const broker::Snapshot snapshot = BrokerSnapshot();  // kept: the view points into it
  const broker::TenantView* view = Find(snapshot, "a");
  ASSERT_NE(view, nullptr);
  EXPECT_EQ(view->request, kGi);
  EXPECT_EQ(view->quota, 3 * kGi);
  EXPECT_EQ(view->borrowed(), 2 * kGi);
  // What the operator reads: gpuslicectl status (table and JSON) and top.
  const ProcessResult status =
      gpuslice::testing::Run({BinDir() + "/gpuslicectl", "status", "--json", "--state-dir", state_dir()},
                             {"LD_LIBRARY_PATH=" + SimLibDir()});
  const Json tenant = Json::parse(status.out, nullptr, false)["gpus"][0]["tenants"][0];
  EXPECT_EQ(tenant.value("memory_request_bytes", uint64_t{0}), kGi) << status.out;
  EXPECT_EQ(tenant.value("quota_bytes", uint64_t{0}), 3 * kGi) << status.out;
  EXPECT_EQ(tenant.value("borrowed_bytes", uint64_t{0}), 2 * kGi) << status.out;
  const ProcessResult table = gpuslice::testing::Run({BinDir() + "/gpuslicectl", "status", "--state-dir", state_dir()},
                                                     {"LD_LIBRARY_PATH=" + SimLibDir()});
  EXPECT_THAT(table.out, ::testing::ContainsRegex("\n  a +3 GiB +1 GiB +3 GiB +100.0% +2 GiB ")) << table.out;
  const ProcessResult top =
      gpuslice::testing::Run({BinDir() + "/gpuslicectl", "top", "--once", "--state-dir", state_dir()},
                             {"LD_LIBRARY_PATH=" + SimLibDir(), "COLUMNS=160", "LINES=40"});
  EXPECT_THAT(top.out, ::testing::ContainsRegex("\n *a [^\n]* 2 GiB ")) << top.out;
  // Now B asks for its request: the 1 GiB A did not borrow is enough, and B gets all of it.
  const ProcessResult b = Ask("b", 4, {"GPUSLICE_MEMORY_REQUEST=1Gi"});
  EXPECT_EQ(ResultOf(b).value("allocated", -1), 4) << b.out;
  EXPECT_EQ(Stop(*a).exit_code, 0);
}

// A newcomer whose request borrowers hold is refused, naming them, and gets in once they free it.
TEST_F(ShimMemoryRequestTest, ANewcomerWhoseRequestIsBorrowedIsRefusedNamingTheBorrowers) {
  auto borrower = Hold("borrower", 14, {"GPUSLICE_MEMORY_LIMIT=4Gi"});  // 3.5 GiB, no request
  const ProcessResult refused = Ask("newcomer", 4, {"GPUSLICE_MEMORY_REQUEST=1Gi"});
  EXPECT_EQ(ResultOf(refused).value("allocated", -1), 0) << refused.out;
  EXPECT_EQ(ResultOf(refused)["refusals"], Json({{"CUDA_ERROR_NOT_PERMITTED", 4}})) << refused.out;
  const std::vector<std::string> lines = GpusliceLines(refused.err);
  ASSERT_EQ(lines.size(), 1u) << refused.err;
  EXPECT_THAT(lines[0], HasSubstr("tenant 'newcomer' cannot hold its memory request of 1 GiB"));
  EXPECT_THAT(lines[0], HasSubstr("512 MiB of it is borrowed (tenant 'borrower' 3.50 GiB beyond no request)"));
  EXPECT_EQ(Stop(*borrower).exit_code, 0);
  const ProcessResult admitted = Ask("newcomer", 4, {"GPUSLICE_MEMORY_REQUEST=1Gi"});
  EXPECT_EQ(ResultOf(admitted).value("allocated", -1), 4) << admitted.out;
}

// Once a request is held, a borrower that held memory before can only give back.
TEST_F(ShimMemoryRequestTest, AHeldRequestStopsBorrowersFromTakingMore) {
  auto borrower = Hold("borrower", 8, {"GPUSLICE_MEMORY_LIMIT=4Gi"});  // 2 GiB
  auto owner = Hold("owner", 1, {"GPUSLICE_MEMORY_REQUEST=2Gi"});      // holds 2 GiB, uses 256 MiB
  const ProcessResult more = Ask("borrower", 1, {"GPUSLICE_MEMORY_LIMIT=4Gi"});
  EXPECT_EQ(ResultOf(more).value("allocated", -1), 0) << "2 + 2 GiB of 4 are committed: " << more.out;
  EXPECT_EQ(Stop(*owner).exit_code, 0);
  const ProcessResult after = Ask("borrower", 1, {"GPUSLICE_MEMORY_LIMIT=4Gi"});
  EXPECT_EQ(ResultOf(after).value("allocated", -1), 1) << "the request left with its last process: " << after.out;
  EXPECT_EQ(Stop(*borrower).exit_code, 0);
}

TEST_F(ShimMemoryRequestTest, RequestsTogetherOverTheGpuAreRefusedWithOneLine) {
  auto b = Hold("b", 1, {"GPUSLICE_MEMORY_REQUEST=3Gi"});
  const ProcessResult a = Ask("a", 1, {"GPUSLICE_MEMORY_REQUEST=2Gi"});
  EXPECT_EQ(ResultOf(a).value("allocated", -1), 0) << a.out;
  const std::vector<std::string> lines = GpusliceLines(a.err);
  ASSERT_EQ(lines.size(), 1u) << a.err;
  EXPECT_THAT(lines[0], HasSubstr("tenant 'a' asks GPU GPU-"));
  EXPECT_THAT(lines[0], HasSubstr("(4 GiB) for a memory request of 2 GiB, but the requests held there already "
                                  "reserve 3 GiB (tenant 'b' 3 GiB)"));
  EXPECT_EQ(Stop(*b).exit_code, 0);
}

TEST_F(ShimMemoryRequestTest, ARequestAboveItsLimitIsRefusedNamingBoth) {
  const ProcessResult r = Ask("a", 1, {"GPUSLICE_MEMORY_REQUEST=3Gi", "GPUSLICE_MEMORY_LIMIT=2Gi"});
  const std::vector<std::string> lines = GpusliceLines(r.err);
  ASSERT_EQ(lines.size(), 1u) << r.err;
  EXPECT_THAT(lines[0], HasSubstr("invalid GPUSLICE_MEMORY_REQUEST='3Gi' above GPUSLICE_MEMORY_LIMIT='2Gi'"));
  // Of different kinds, they are compared on the device: 75% of 4 GiB is above 2 GiB.
  const ProcessResult mixed = Ask("a", 1, {"GPUSLICE_MEMORY_REQUEST=75%", "GPUSLICE_MEMORY_LIMIT=2Gi"});
  const std::vector<std::string> mixed_lines = GpusliceLines(mixed.err);
  ASSERT_EQ(mixed_lines.size(), 1u) << mixed.err;
  EXPECT_THAT(mixed_lines[0], HasSubstr("GPUSLICE_MEMORY_REQUEST='75%' above GPUSLICE_MEMORY_LIMIT='2Gi' on a "
                                        "device of 4Gi"));
}

}  // namespace
}  // namespace gpuslice::testing
