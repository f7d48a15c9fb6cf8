// cuGetProcAddress of the simulated driver: the version rule, the per-thread twins, the errors,
// and that every answer is exactly the function the library exports under the expected name.
//
// The expected export names are computed here from the (base, versions) rows of the generated
// table, independently of the generator's name columns and of the driver's lookup code; the
// oracle for "the simulated driver implements it" is dlsym on the library's own handle.
#include "sim/driver/driver_api.h"  // first: the old and per-thread names must be declared

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "tests/support/subprocess.h"

#include "tests/support/test_env.h"

// Every export name that cuda.h declares has exactly the signature of its PFN typedef: a table
// whose rows were off by one version would hand out functions of the wrong ABI.
#define GPUSLICE_PROC_DECLARED(export_name, pfn) \
  static_assert(std::is_same_v<decltype(&export_name), pfn>, #export_name " is not a " #pfn);
#include "proc_table.inc"
#undef GPUSLICE_PROC_DECLARED

namespace {

using gpuslice::testing::SimTest;

struct PlainRow {
  std::string_view base;
  int version;
  std::string_view export_name;
  std::string_view per_thread_export_name;
};
constexpr PlainRow kPlainRows[] = {
#define GPUSLICE_PROC(base, version, export_name, per_thread_export_name, pfn) \
  {base, version, export_name, per_thread_export_name},
#include "proc_table.inc"
#undef GPUSLICE_PROC
};

struct PerThreadRow {
  std::string_view base;
  int typedef_version;
  std::string_view suffix;
  std::string_view export_name;
};
constexpr PerThreadRow kPerThreadRows[] = {
#define GPUSLICE_PROC_PER_THREAD(base, typedef_version, suffix, export_name, pfn) \
  {base, typedef_version, suffix, export_name},
#include "proc_table.inc"
#undef GPUSLICE_PROC_PER_THREAD
};

constexpr int kCurrentVersion = 13000;
constexpr cuuint64_t kFlagModes[] = {CU_GET_PROC_ADDRESS_DEFAULT, CU_GET_PROC_ADDRESS_LEGACY_STREAM,
                                     CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM};
// Where a lookup must write nullptr: a pointer that is certainly no function.
void* const kGarbage = reinterpret_cast<void*>(0x1);

// The version rule, from the typedef versions alone (REFERENCE.md section 1).
class VersionRule {
 public:
  VersionRule() {
    for (const PlainRow& row : kPlainRows) versions_[std::string(row.base)].push_back(row.version);
    for (auto& [base, versions] : versions_) std::sort(versions.begin(), versions.end());
    for (const PerThreadRow& row : kPerThreadRows)
      per_thread_[std::string(row.base)].push_back({row.typedef_version, std::string(row.suffix)});
  }

  const std::map<std::string, std::vector<int>>& versions() const { return versions_; }

  // The export name cuGetProcAddress must resolve, or "" with *status saying why there is none.
  std::string ExpectedName(const std::string& base, int requested, bool per_thread,
                           CUdriverProcAddressQueryResult* status) const {
    auto it = versions_.find(base);
    if (it == versions_.end()) {
      *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
      return "";
    }
    const int k = IndexAtOrBelow(it->second, requested);
    if (k < 0) {
      *status = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
      return "";
    }
    *status = CU_GET_PROC_ADDRESS_SUCCESS;
    std::string name = k == 0 ? base : base + "_v" + std::to_string(k + 1);
    if (per_thread) name += PerThreadSuffix(base, it->second, k);
    return name;
  }

 private:
  // Index of the largest version <= requested, -1 if none.
  static int IndexAtOrBelow(const std::vector<int>& versions, int requested) {
    int k = -1;
    for (size_t i = 0; i < versions.size(); ++i)
      if (versions[i] <= requested) k = static_cast<int>(i);
    return k;
  }

  // A _vN_ptsz typedef is the twin of the largest plain version <= N.
  std::string PerThreadSuffix(const std::string& base, const std::vector<int>& versions, int k) const {
    auto it = per_thread_.find(base);
    if (it == per_thread_.end()) return "";
    for (const auto& [typedef_version, suffix] : it->second)
      if (IndexAtOrBelow(versions, typedef_version) == k) return suffix;
    return "";
  }

  std::map<std::string, std::vector<int>> versions_;
  std::map<std::string, std::vector<std::pair<int, std::string>>> per_thread_;
};

// The simulated driver this test links: dlsym on it is the oracle for "is exported".
void* SimHandle() {
  static void* const handle = dlopen("libcuda.so.1", RTLD_NOLOAD | RTLD_LAZY);
  return handle;
}

void* Exported(const std::string& name) { return name.empty() ? nullptr : dlsym(SimHandle(), name.c_str()); }

struct Answer {
  CUresult result;
  void* pfn;
  CUdriverProcAddressQueryResult status;
};

Answer Ask(const char* symbol, int version, cuuint64_t flags = CU_GET_PROC_ADDRESS_DEFAULT) {
  Answer a{CUDA_ERROR_UNKNOWN, kGarbage, static_cast<CUdriverProcAddressQueryResult>(-1)};
  a.result = cuGetProcAddress_v2(symbol, &a.pfn, version, flags, &a.status);
  return a;
}

// The legacy entry point answers as cuGetProcAddress_v2 does, minus the status.
Answer AskLegacy(const char* symbol, int version, cuuint64_t flags = CU_GET_PROC_ADDRESS_DEFAULT) {
  Answer a{CUDA_ERROR_UNKNOWN, kGarbage, static_cast<CUdriverProcAddressQueryResult>(-1)};
  a.result = cuGetProcAddress(symbol, &a.pfn, version, flags);
  return a;
}

// Checks one lookup against the export name the rule gives ("" for none).
void ExpectResolves(const char* symbol, int version, cuuint64_t flags, const std::string& expected_name) {
  SCOPED_TRACE(std::string(symbol) + "@" + std::to_string(version) + " flags " + std::to_string(flags) + " -> " +
               (expected_name.empty() ? "(none)" : expected_name));
  void* expected = Exported(expected_name);
  const Answer a = Ask(symbol, version, flags);
  const Answer legacy = AskLegacy(symbol, version, flags);
  EXPECT_EQ(a.pfn, expected);
  EXPECT_EQ(legacy.pfn, expected);
  EXPECT_EQ(legacy.result, a.result);
  if (expected != nullptr) {
    EXPECT_EQ(a.result, CUDA_SUCCESS);
    EXPECT_EQ(a.status, CU_GET_PROC_ADDRESS_SUCCESS);
  } else {
    EXPECT_EQ(a.result, CUDA_ERROR_NOT_FOUND);
    EXPECT_NE(a.status, CU_GET_PROC_ADDRESS_SUCCESS);
  }
}

class SimProcAddressTest : public SimTest {
 protected:
  void SetUp() override {
    SimTest::SetUp();
    ASSERT_NE(SimHandle(), nullptr) << dlerror();
  }
};

// Exit status 0 when cuInit and cuDeviceGetCount can be looked up before cuInit and work.
int LookUpBeforeInit() {
  void* init = nullptr;
  void* get_count = nullptr;
  if (cuGetProcAddress_v2("cuInit", &init, kCurrentVersion, CU_GET_PROC_ADDRESS_DEFAULT, nullptr) != CUDA_SUCCESS)
    return 2;
  if (cuGetProcAddress("cuDeviceGetCount", &get_count, kCurrentVersion, 0) != CUDA_SUCCESS) return 3;
  int count = 0;
  auto device_get_count = reinterpret_cast<PFN_cuDeviceGetCount_v2000>(get_count);
  if (device_get_count(&count) != CUDA_ERROR_NOT_INITIALIZED) return 4;  // then this was after cuInit
  if (reinterpret_cast<PFN_cuInit_v2000>(init)(0) != CUDA_SUCCESS) return 5;
  if (device_get_count(&count) != CUDA_SUCCESS || count < 1) return 6;
  return 0;
}

// The CUDA runtime looks up cuInit itself through cuGetProcAddress, so lookups must work in a
// process that has not called cuInit. Checked in a fresh process (a "threadsafe" death test
// re-executes this test alone), whatever else this process has done.
TEST_F(SimProcAddressTest, WorksBeforeCuInit) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(std::_Exit(LookUpBeforeInit()), ::testing::ExitedWithCode(0), "");
}

TEST_F(SimProcAddressTest, MemAllocFollowsTheVersionRule) {
  // 2000 is the 32-bit cuMemAlloc: found exactly when the simulated driver exports that name.
  ExpectResolves("cuMemAlloc", 2000, CU_GET_PROC_ADDRESS_DEFAULT, "cuMemAlloc");
  void* v2 = Exported("cuMemAlloc_v2");
  ASSERT_NE(v2, nullptr);
  for (int version : {3020, 4000, 12000, kCurrentVersion, 99999}) {
    const Answer a = Ask("cuMemAlloc", version);
    EXPECT_EQ(a.result, CUDA_SUCCESS) << version;
    EXPECT_EQ(a.pfn, v2) << version;
    EXPECT_EQ(a.status, CU_GET_PROC_ADDRESS_SUCCESS) << version;
  }
  // No per-thread twin: the per-thread flag changes nothing.
  EXPECT_EQ(Ask("cuMemAlloc", kCurrentVersion, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM).pfn, v2);
}

TEST_F(SimProcAddressTest, CtxSynchronizeChangedSignatureIn13) {
  void* v1 = Exported("cuCtxSynchronize");
  ASSERT_NE(v1, nullptr);
  EXPECT_EQ(Ask("cuCtxSynchronize", 12000).pfn, v1);
  EXPECT_EQ(Ask("cuCtxSynchronize", 12090).pfn, v1);
  ExpectResolves("cuCtxSynchronize", 13000, CU_GET_PROC_ADDRESS_DEFAULT, "cuCtxSynchronize_v2");
  EXPECT_NE(Ask("cuCtxSynchronize", 13000).pfn, v1);
}

TEST_F(SimProcAddressTest, CtxCreateHasFourVersions) {
  ExpectResolves("cuCtxCreate", 2000, CU_GET_PROC_ADDRESS_DEFAULT, "cuCtxCreate");
  ExpectResolves("cuCtxCreate", 3020, CU_GET_PROC_ADDRESS_DEFAULT, "cuCtxCreate_v2");
  ExpectResolves("cuCtxCreate", 11040, CU_GET_PROC_ADDRESS_DEFAULT, "cuCtxCreate_v3");
  ExpectResolves("cuCtxCreate", 12040, CU_GET_PROC_ADDRESS_DEFAULT, "cuCtxCreate_v3");
  ExpectResolves("cuCtxCreate", 12050, CU_GET_PROC_ADDRESS_DEFAULT, "cuCtxCreate_v4");
}

TEST_F(SimProcAddressTest, GetProcAddressReturnsItself) {
  void* v2 = Exported("cuGetProcAddress_v2");
  ASSERT_NE(v2, nullptr);
  EXPECT_EQ(v2, reinterpret_cast<void*>(&cuGetProcAddress_v2));
  const Answer a = Ask("cuGetProcAddress", 12000);
  ASSERT_EQ(a.result, CUDA_SUCCESS);
  EXPECT_EQ(a.pfn, v2);
  EXPECT_EQ(Ask("cuGetProcAddress", 11030).pfn, Exported("cuGetProcAddress"));

  // And the pointer it hands out answers like the original.
  void* again = nullptr;
  CUdriverProcAddressQueryResult status{};
  ASSERT_EQ(reinterpret_cast<PFN_cuGetProcAddress_v12000>(a.pfn)("cuMemAlloc", &again, kCurrentVersion,
                                                                 CU_GET_PROC_ADDRESS_DEFAULT, &status),
            CUDA_SUCCESS);
  EXPECT_EQ(again, Exported("cuMemAlloc_v2"));
}

TEST_F(SimProcAddressTest, PerThreadFlagSelectsTheTwins) {
  constexpr cuuint64_t kPerThread = CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
  for (cuuint64_t legacy : {CU_GET_PROC_ADDRESS_DEFAULT, CU_GET_PROC_ADDRESS_LEGACY_STREAM}) {
    ExpectResolves("cuLaunchKernel", kCurrentVersion, legacy, "cuLaunchKernel");
    ExpectResolves("cuMemcpyHtoD", kCurrentVersion, legacy, "cuMemcpyHtoD_v2");
    ExpectResolves("cuStreamSynchronize", kCurrentVersion, legacy, "cuStreamSynchronize");
  }
  ExpectResolves("cuLaunchKernel", kCurrentVersion, kPerThread, "cuLaunchKernel_ptsz");
  ExpectResolves("cuMemcpyHtoD", kCurrentVersion, kPerThread, "cuMemcpyHtoD_v2_ptds");
  ExpectResolves("cuMemcpyHtoD", 2000, kPerThread, "cuMemcpyHtoD");  // v2000 has no twin
  ExpectResolves("cuStreamSynchronize", kCurrentVersion, kPerThread, "cuStreamSynchronize_ptsz");
  ExpectResolves("cuMemAllocAsync", kCurrentVersion, kPerThread, "cuMemAllocAsync_ptsz");
}

TEST_F(SimProcAddressTest, TooOldVersionIsNotSufficient) {
  for (auto [symbol, version] : {std::pair{"cuMemAllocAsync", 11000},
                                 {"cuMemAllocAsync", 11019},
                                 {"cuCtxSynchronize", 1000},
                                 {"cuInit", 0},
                                 {"cuInit", -1}}) {
    const Answer a = Ask(symbol, version);
    EXPECT_EQ(a.result, CUDA_ERROR_NOT_FOUND) << symbol << "@" << version;
    EXPECT_EQ(a.pfn, nullptr) << symbol << "@" << version;
    EXPECT_EQ(a.status, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT) << symbol << "@" << version;
  }
  ExpectResolves("cuMemAllocAsync", 11020, CU_GET_PROC_ADDRESS_DEFAULT, "cuMemAllocAsync");
}

TEST_F(SimProcAddressTest, UnknownSymbolIsNotFound) {
  // Export names and near misses are not base symbols.
  for (const char* symbol : {"cuNoSuchFunction", "", "cuMemAlloc_v2", "cuLaunchKernel_ptsz", "cumemalloc", "cuMemAllo",
                             "cuMemAllocX", "cuda", "nvmlInit"}) {
    const Answer a = Ask(symbol, kCurrentVersion);
    EXPECT_EQ(a.result, CUDA_ERROR_NOT_FOUND) << symbol;
    EXPECT_EQ(a.pfn, nullptr) << symbol;
    EXPECT_EQ(a.status, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND) << symbol;
    const Answer legacy = AskLegacy(symbol, kCurrentVersion);
    EXPECT_EQ(legacy.result, CUDA_ERROR_NOT_FOUND) << symbol;
    EXPECT_EQ(legacy.pfn, nullptr) << symbol;
  }
}

TEST_F(SimProcAddressTest, BadArgumentsAreInvalidValue) {
  void* pfn = kGarbage;
  CUdriverProcAddressQueryResult status{};
  EXPECT_EQ(cuGetProcAddress_v2(nullptr, &pfn, kCurrentVersion, 0, &status), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(pfn, nullptr);
  EXPECT_EQ(cuGetProcAddress_v2("cuInit", nullptr, kCurrentVersion, 0, &status), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuGetProcAddress(nullptr, &pfn, kCurrentVersion, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuGetProcAddress("cuInit", nullptr, kCurrentVersion, 0), CUDA_ERROR_INVALID_VALUE);
  // Unknown flag bits, and both stream modes at once.
  for (cuuint64_t flags :
       {cuuint64_t{4}, cuuint64_t{1} << 40, ~cuuint64_t{0},
        cuuint64_t{CU_GET_PROC_ADDRESS_LEGACY_STREAM | CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM}}) {
    pfn = kGarbage;
    EXPECT_EQ(cuGetProcAddress_v2("cuInit", &pfn, kCurrentVersion, flags, &status), CUDA_ERROR_INVALID_VALUE) << flags;
    EXPECT_EQ(pfn, nullptr) << flags;
    pfn = kGarbage;
    EXPECT_EQ(cuGetProcAddress("cuInit", &pfn, kCurrentVersion, flags), CUDA_ERROR_INVALID_VALUE) << flags;
    EXPECT_EQ(pfn, nullptr) << flags;
  }
  // The status is optional.
  pfn = nullptr;
  EXPECT_EQ(cuGetProcAddress_v2("cuInit", &pfn, kCurrentVersion, 0, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(pfn, Exported("cuInit"));
}

TEST_F(SimProcAddressTest, ExportTableIsNotSupported) {
  const void* table = kGarbage;
  CUuuid id{};
  EXPECT_EQ(cuGetExportTable(&table, &id), CUDA_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(table, nullptr);
  EXPECT_EQ(cuGetExportTable(nullptr, nullptr), CUDA_ERROR_NOT_SUPPORTED);
}

// The generator's export-name columns agree with the rule computed here.
TEST_F(SimProcAddressTest, GeneratedTableFollowsTheRule) {
  const VersionRule rule;
  EXPECT_GT(std::size(kPlainRows), 500u);  // every PFN typedef of CUDA 12.5+, old ones included
  EXPECT_GT(std::size(kPerThreadRows), 90u);
  CUdriverProcAddressQueryResult status{};
  for (const PlainRow& row : kPlainRows) {
    const std::string base(row.base);
    EXPECT_EQ(row.export_name, rule.ExpectedName(base, row.version, false, &status)) << base << row.version;
    const std::string twin = rule.ExpectedName(base, row.version, true, &status);
    EXPECT_EQ(row.per_thread_export_name, twin == row.export_name ? "" : twin) << base << row.version;
  }
  for (const PerThreadRow& row : kPerThreadRows) {
    EXPECT_EQ(row.export_name, rule.ExpectedName(std::string(row.base), row.typedef_version, true, &status))
        << row.base << row.typedef_version;
  }
  // The examples of REFERENCE.md section 1 and of cuda.h's own #defines.
  EXPECT_EQ(rule.ExpectedName("cuMemAlloc", 2000, false, &status), "cuMemAlloc");
  EXPECT_EQ(rule.ExpectedName("cuMemAlloc", 3020, false, &status), "cuMemAlloc_v2");
  EXPECT_EQ(rule.ExpectedName("cuCtxCreate", kCurrentVersion, false, &status), "cuCtxCreate_v4");
  EXPECT_EQ(rule.ExpectedName("cuCtxSynchronize", 13000, false, &status), "cuCtxSynchronize_v2");
  EXPECT_EQ(rule.ExpectedName("cuLaunchKernel", kCurrentVersion, true, &status), "cuLaunchKernel_ptsz");
  EXPECT_EQ(rule.ExpectedName("cuMemcpyHtoD", kCurrentVersion, true, &status), "cuMemcpyHtoD_v2_ptds");
  EXPECT_EQ(rule.ExpectedName("cuStreamBeginCapture", kCurrentVersion, true, &status), "cuStreamBeginCapture_v2_ptsz");
}

// Every PFN typedef version, the versions around it, and every flag mode: the answer is exactly
// what the library exports under the name the rule gives, or NOT_FOUND and nullptr.
TEST_F(SimProcAddressTest, EveryTableRowInEveryFlagMode) {
  const VersionRule rule;
  int implemented = 0;
  int lookups = 0;
  for (const auto& [base, versions] : rule.versions()) {
    std::vector<int> requested = {0, 1000, kCurrentVersion, 99999};
    for (int v : versions) requested.insert(requested.end(), {v - 10, v - 1, v, v + 1, v + 10});
    for (int version : requested) {
      for (cuuint64_t flags : kFlagModes) {
        const bool per_thread = flags == CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
        CUdriverProcAddressQueryResult expected_status{};
        const std::string name = rule.ExpectedName(base, version, per_thread, &expected_status);
        void* expected = Exported(name);
        const Answer a = Ask(base.c_str(), version, flags);
        const Answer legacy = AskLegacy(base.c_str(), version, flags);
        ++lookups;
        const std::string where = base + "@" + std::to_string(version) + " flags " + std::to_string(flags) + " -> " +
                                  (name.empty() ? "(none)" : name);
        ASSERT_EQ(a.pfn, expected) << where;
        ASSERT_EQ(legacy.pfn, expected) << where;
        ASSERT_EQ(legacy.result, a.result) << where;
        if (expected != nullptr) {
          ASSERT_EQ(a.result, CUDA_SUCCESS) << where;
          ASSERT_EQ(a.status, CU_GET_PROC_ADDRESS_SUCCESS) << where;
          ++implemented;
        } else {
          ASSERT_EQ(a.result, CUDA_ERROR_NOT_FOUND) << where;
          // A name the rule gives but the simulated driver does not define is "not found".
          ASSERT_EQ(a.status, name.empty() ? expected_status : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND) << where;
        }
      }
    }
  }
  RecordProperty("lookups", lookups);
  RecordProperty("implemented", implemented);
  EXPECT_GT(implemented, 0);
}

}  // namespace

namespace gpuslice::testing {
namespace {

// The same command that checks a real driver (gpu_real_driver_test), run over the simulator in
// a separate process that loads it with dlopen as the CUDA runtime would.
TEST(SimProcRuleCheckTest, EveryTypedefResolvesByTheVersionRuleThroughDlopen) {
  const ProcessResult r =
      gpuslice::testing::Run({BinDir() + "/gpuslice-proc-rule-check"}, {"LD_LIBRARY_PATH=" + SimLibDir()});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("\"mismatches\":0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(SimLibDir()), std::string::npos) << "must have loaded the simulator: " << r.out;
}

}  // namespace
}  // namespace gpuslice::testing
