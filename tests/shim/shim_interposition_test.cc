// libgpuslice.so is on every path an application can take to the driver (docs/interposition.md):
// a program linked with -lcuda (also built for the per-thread default stream, which imports the
// _ptsz names), one that dlopen()s libcuda and dlsym()s exact versioned names on the handle or
// through RTLD_DEFAULT, and one that obtains everything through cuGetProcAddress as libcudart
// does. Whichever path, a 1 GiB quota admits exactly four 256 MiB allocations, refuses the rest
// with CUDA_ERROR_OUT_OF_MEMORY, and the program carries on. Also: the shim's dlsym keeps
// RTLD_NEXT relative to the caller.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/support/shim_fixture.h"

namespace gpuslice::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

const std::vector<std::string> kOneGiQuota = {"GPUSLICE_MEMORY_LIMIT=1Gi"};
const std::vector<std::string> kSixChunks = {"--chunk", "256Mi", "--count", "6"};

void ExpectFourGrantedTwoRefused(const ProcessResult& r) {
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  const Json result = ResultOf(r);
  EXPECT_EQ(result.value("allocated", -1), 4) << r.out;
  EXPECT_EQ(result.value("refused", -1), 2) << r.out;
  EXPECT_EQ(result["refusals"].value("CUDA_ERROR_OUT_OF_MEMORY", 0), 2) << r.out;
  EXPECT_EQ(result.value("bytes_obtained", uint64_t{0}), kGi) << r.out;
  EXPECT_TRUE(GpusliceLines(r.err).empty()) << r.err;
}

class ShimInterpositionTest : public ShimTest {};
class ShimInterpositionPathTest : public ShimTest, public ::testing::WithParamInterface<DriverPath> {};

TEST_P(ShimInterpositionPathTest, QuotaAdmitsExactlyWhatFitsAndRefusesTheRestWithOutOfMemory) {
  const ProcessResult r = RunShimmed(GetParam().Command("alloc", kSixChunks), kOneGiQuota);
  ExpectFourGrantedTwoRefused(r);
  if (GetParam().app == "dlsym") {
    EXPECT_EQ(ResultOf(r).value("mem_alloc_from", ""), "libgpuslice.so")
        << "the program's cuMemAlloc_v2 pointer must lead into the shim: " << r.out;
  }
}

TEST_P(ShimInterpositionPathTest, WithoutTheShimTheSameProgramGetsEverything) {
  // The control: the quota comes from the shim, not from the program or the simulated device.
  const ProcessResult r = gpuslice::testing::Run(GetParam().Command("alloc", kSixChunks),
                                                 {"LD_LIBRARY_PATH=" + SimLibDir(), "GPUSLICE_MEMORY_LIMIT=1Gi"});
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_EQ(ResultOf(r).value("allocated", -1), 6) << r.out;
}

INSTANTIATE_TEST_SUITE_P(EveryPath, ShimInterpositionPathTest,
                         ::testing::Values(kDirect, kDirectPtsz, kDlsymHandle, kDlsymHandlePtsz, kDlsymDefault,
                                           kProcAddress, kProcAddressPtsz, kWorkload),
                         [](const auto& info) { return info.param.name; });

// Stream-ordered allocations have _ptsz twins: a program built for the per-thread default
// stream, or a runtime asking cuGetProcAddress for per-thread entry points, must meet them too.
struct StreamOrderedCase {
  DriverPath path;
  std::string api;
};

class ShimStreamOrderedInterpositionTest : public ShimTest, public ::testing::WithParamInterface<StreamOrderedCase> {};

TEST_P(ShimStreamOrderedInterpositionTest, QuotaHoldsForStreamOrderedAllocations) {
  const ProcessResult r = RunShimmed(GetParam().path.Command(GetParam().api, kSixChunks), kOneGiQuota);
  ExpectFourGrantedTwoRefused(r);
  const Json result = ResultOf(r);
  if (GetParam().path.app == "dlsym" && result.value("per_thread", false)) {
    EXPECT_EQ(result.value("mem_alloc_async_symbol", ""), "cuMemAllocAsync_ptsz")
        << "a per-thread lookup must be handed the shim's _ptsz hook: " << r.out;
  }
}

INSTANTIATE_TEST_SUITE_P(
    PerThreadAndLegacy, ShimStreamOrderedInterpositionTest,
    ::testing::Values(StreamOrderedCase{kDirectPtsz, "async"}, StreamOrderedCase{kDirectPtsz, "pool"},
                      StreamOrderedCase{kDlsymHandlePtsz, "async"}, StreamOrderedCase{kDlsymHandlePtsz, "pool"},
                      StreamOrderedCase{kProcAddressPtsz, "async"}, StreamOrderedCase{kProcAddressPtsz, "pool"},
                      StreamOrderedCase{kProcAddress, "pool"}, StreamOrderedCase{kWorkload, "async"},
                      StreamOrderedCase{kWorkload, "pool"}),
    [](const auto& info) { return info.param.path.name + "_" + info.param.api; });

// What the second build is for: cuda.h renamed its stream calls, so it imports the _ptsz names
// (which only a shim exporting those names can catch), and the plain build does not.
TEST_F(ShimInterpositionTest, PerThreadBuildImportsThePtszNames) {
  const ProcessResult ptsz = gpuslice::testing::Run({"/bin/sh", "-c", "nm -u " + App("direct-ptsz")});
  ASSERT_EQ(ptsz.exit_code, 0) << Describe(ptsz);
  for (const char* name :
       {"cuMemAllocAsync_ptsz", "cuMemAllocFromPoolAsync_ptsz", "cuMemFreeAsync_ptsz", "cuStreamSynchronize_ptsz"})
    EXPECT_THAT(ptsz.out, HasSubstr(std::string(name) + "\n"));
  EXPECT_THAT(ptsz.out, HasSubstr("cuMemAlloc_v2\n"));

  const ProcessResult plain = gpuslice::testing::Run({"/bin/sh", "-c", "nm -u " + App("direct")});
  ASSERT_EQ(plain.exit_code, 0) << Describe(plain);
  EXPECT_THAT(plain.out, HasSubstr("cuMemAllocAsync\n"));
  EXPECT_THAT(plain.out, Not(HasSubstr("_ptsz")));
}

// RTLD_NEXT means "after the object that called dlsym". The program is that object, and the
// preloaded shim comes right after it, so cuMemAlloc_v2 and dlsym must resolve to the shim; had
// the shim's dlsym made glibc see the shim as the caller, both would resolve past it.
TEST_F(ShimInterpositionTest, RtldNextIsResolvedRelativeToTheCallingObject) {
  const ProcessResult r = RunShimmed({App("dlsym"), "rtld-next"});
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  const Json j = EventOf(r.out, "rtld_next");
#ifdef GPUSLICE_SANITIZER_BUILD
  // The sanitizer runtime intercepts puts: it is what follows the program and the shim.
  const auto kLibc = ::testing::AnyOf(HasSubstr("libc.so"), HasSubstr("libasan.so"), HasSubstr("libtsan.so"));
#else
  const auto kLibc = HasSubstr("libc.so");
#endif
  EXPECT_THAT(j.value("puts", ""), kLibc) << r.out;
  EXPECT_EQ(j.value("cuMemAlloc_v2", ""), ShimPath()) << r.out;
  EXPECT_EQ(j.value("dlsym", ""), ShimPath()) << r.out;
  EXPECT_EQ(j.value("default_cuMemAlloc_v2", ""), ShimPath()) << r.out;
  EXPECT_THAT(j.value("default_puts", ""), kLibc) << r.out;
}

TEST_F(ShimInterpositionTest, RtldNextWithoutTheShimFindsLibcAfterTheProgram) {
  // The control for the test above: the same lookups without the preload.
  const ProcessResult r = gpuslice::testing::Run({App("dlsym"), "rtld-next"}, {"LD_LIBRARY_PATH=" + SimLibDir()});
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  const Json j = EventOf(r.out, "rtld_next");
  EXPECT_EQ(j.value("cuMemAlloc_v2", "?"), "") << r.out;
  EXPECT_THAT(j.value("dlsym", ""), HasSubstr("libc.so")) << r.out;
}

// dlsym(RTLD_DEFAULT, "cuMemAlloc_v2") finds the shim's export first in the global scope; what
// it returns must charge the quota (the DlsymDefault case above allocates through it).
TEST_F(ShimInterpositionTest, RtldDefaultLookupReturnsAHookThatChargesTheQuota) {
  const ProcessResult r = RunShimmed(kDlsymDefault.Command("alloc", kSixChunks), kOneGiQuota);
  ExpectFourGrantedTwoRefused(r);
  EXPECT_EQ(ResultOf(r).value("mem_alloc_from", ""), "libgpuslice.so") << r.out;
}

}  // namespace
}  // namespace gpuslice::testing
