// GPUSLICE_SIM_PROC_ADDRESS=internal: the simulated cuGetProcAddress answers with internal entry
// points, as some real drivers do — functions of this library that are not its exports (no
// dlsym() returns them, dladdr names none of them) but behave exactly as the exports they stand
// for. This is what shim_proc_address_rule_test runs gpuslice against; here the mode itself is
// checked: every answer differs from the export, and calls through the answers work.
#include "sim/driver/driver_api.h"  // first: the old and per-thread names must be declared

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "common/proc_rows.h"
#include "gpuslice/sim_query.h"
#include "tests/support/sim_driver_helpers.h"
#include "tests/support/subprocess.h"
#include "tests/support/test_env.h"

namespace gpuslice::testing {
namespace {

void* SimHandle() {
  static void* const handle = dlopen("libcuda.so.1", RTLD_NOLOAD | RTLD_LAZY);
  return handle;
}

// The mode is read once per process, at the first lookup: each case runs in its own process.
class SimInternalEntryPointsTest : public SimTest {
 protected:
  void SetUp() override {
    SimTest::SetUp();
    SetEnv("GPUSLICE_SIM_PROC_ADDRESS", "internal");
  }

  template <typename Pfn>
  Pfn Get(const char* base, int version = CUDA_VERSION) {
    void* pfn = nullptr;
    EXPECT_EQ(cuGetProcAddress_v2(base, &pfn, version, CU_GET_PROC_ADDRESS_DEFAULT, nullptr), CUDA_SUCCESS) << base;
    return reinterpret_cast<Pfn>(pfn);
  }
};

TEST_F(SimInternalEntryPointsTest, EveryAnswerIsAFunctionOfTheLibraryThatIsNotItsExport) {
  Dl_info self{};
  ASSERT_NE(dladdr(dlsym(SimHandle(), "cuInit"), &self), 0);
  int answered = 0;
  for (const ProcRow& row : kProcRows) {
    for (const bool per_thread : {false, true}) {
      const char* name = (per_thread && *row.per_thread_name) ? row.per_thread_name : row.name;
      const cuuint64_t flags = per_thread ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
                                          : CU_GET_PROC_ADDRESS_LEGACY_STREAM;
      void* exported = dlsym(SimHandle(), name);
      void* pfn = reinterpret_cast<void*>(0x1);
      CUdriverProcAddressQueryResult status{};
      const CUresult rc = cuGetProcAddress_v2(row.base, &pfn, row.version, flags, &status);
      const std::string where = std::string(row.base) + " v" + std::to_string(row.version) +
                                (per_thread ? " ptsz" : "");
      if (!exported) {  // not implemented: still reported missing, never a pointer to something
        EXPECT_EQ(rc, CUDA_ERROR_NOT_FOUND) << where;
        EXPECT_EQ(pfn, nullptr) << where;
        continue;
      }
      ASSERT_EQ(rc, CUDA_SUCCESS) << where;
      ASSERT_NE(pfn, nullptr) << where;
      EXPECT_NE(pfn, exported) << where << ": the export itself was handed out";
      Dl_info info{};
      ASSERT_NE(dladdr(pfn, &info), 0) << where;
      EXPECT_EQ(info.dli_fbase, self.dli_fbase) << where << ": not a function of the simulated driver";
      EXPECT_TRUE(info.dli_sname == nullptr || std::strcmp(info.dli_sname, name) != 0)
          << where << " is named " << info.dli_sname;
      ++answered;
    }
  }
  // Every (row, stream mode) whose export exists was checked above; 237 of them when written.
  EXPECT_GT(answered, 200) << "the loop must have met the simulated driver's entry points";
}

TEST_F(SimInternalEntryPointsTest, CallsThroughTheInternalEntryPointsBehaveAsTheExports) {
  // cuGetProcAddress through itself, as libcudart does: the answer is internal too, and works.
  auto get_proc = Get<PFN_cuGetProcAddress_v12000>("cuGetProcAddress");
  ASSERT_NE(get_proc, nullptr);
  EXPECT_NE(reinterpret_cast<void*>(get_proc), dlsym(SimHandle(), "cuGetProcAddress_v2"));
  auto ask = [&](const char* base) {
    void* pfn = nullptr;
    EXPECT_EQ(get_proc(base, &pfn, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, nullptr), CUDA_SUCCESS) << base;
    return pfn;
  };
  auto init = reinterpret_cast<PFN_cuInit_v2000>(ask("cuInit"));
  auto retain = reinterpret_cast<PFN_cuDevicePrimaryCtxRetain_v7000>(ask("cuDevicePrimaryCtxRetain"));
  auto set_current = reinterpret_cast<PFN_cuCtxSetCurrent_v4000>(ask("cuCtxSetCurrent"));
  auto alloc = reinterpret_cast<PFN_cuMemAlloc_v3020>(ask("cuMemAlloc"));
  auto free_ = reinterpret_cast<PFN_cuMemFree_v3020>(ask("cuMemFree"));
  auto get_info = reinterpret_cast<PFN_cuMemGetInfo_v3020>(ask("cuMemGetInfo"));
  ASSERT_TRUE(init && retain && set_current && alloc && free_ && get_info);
  CUdeviceptr early = 0;
  EXPECT_EQ(alloc(&early, 1), CUDA_ERROR_NOT_INITIALIZED) << "the export's error, through the trampoline";
  ASSERT_CU(init(0));
  CUcontext ctx = nullptr;
  ASSERT_CU(retain(&ctx, 0));
  ASSERT_CU(set_current(ctx));
  size_t free_before = 0, total = 0;
  ASSERT_CU(get_info(&free_before, &total));
  CUdeviceptr p = 0;
  ASSERT_CU(alloc(&p, 256 << 20));
  EXPECT_NE(p, 0u);
  simquery::Snapshot snapshot;
  std::string error;
  ASSERT_TRUE(simquery::TakeSnapshot(state_path(), &snapshot, &error)) << error;
  EXPECT_EQ(snapshot.devices.at(0).used_memory, uint64_t{256} << 20) << "the device was charged";
  ASSERT_CU(free_(p));
  size_t free_after = 0;
  ASSERT_CU(get_info(&free_after, &total));
  EXPECT_EQ(free_after, free_before);
}

TEST(SimProcAddressModeTest, AnInvalidModeFailsEveryLookupWithOneLineNamingTheVariable) {
  const ProcessResult r =
      gpuslice::testing::Run({BinDir() + "/gpuslice-proc-rule-check"},
                             {"LD_LIBRARY_PATH=" + SimLibDir(), "GPUSLICE_SIM_PROC_ADDRESS=exported"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_EQ(r.err,
            "gpuslice-sim: invalid GPUSLICE_SIM_PROC_ADDRESS='exported'; expected exports or internal, "
            "e.g. GPUSLICE_SIM_PROC_ADDRESS=internal\n");
  EXPECT_EQ(r.out.find("\"mismatches\":0"), std::string::npos) << r.out;
}

TEST(SimProcAddressModeTest, ExportsIsTheDefaultAndCanBeNamed) {
  for (const std::string value : {"", "exports"}) {
    const ProcessResult r =
        gpuslice::testing::Run({BinDir() + "/gpuslice-proc-rule-check"},
                               {"LD_LIBRARY_PATH=" + SimLibDir(), "GPUSLICE_SIM_PROC_ADDRESS=" + value});
    EXPECT_EQ(r.exit_code, 0) << value << ": " << r.out << r.err;
    EXPECT_EQ(r.err, "");
  }
}

}  // namespace
}  // namespace gpuslice::testing
