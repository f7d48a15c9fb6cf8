// libgpuslice.so is a guest in arbitrary processes (it may sit in /etc/ld.so.preload): until the
// first CUDA call it does nothing at all — no file, no output, not even a complaint about a bad
// GPUSLICE_* value — and when it does work it brings no dependency beyond glibc, exports nothing
// beyond the functions it interposes, and leaves the process's signal dispositions, umask and
// threads as they were.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/shim_fixture.h"

namespace gpuslice::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class ShimInertnessTest : public ShimTest {};

TEST_F(ShimInertnessTest, AProgramThatNeverCallsCudaIsUntouched) {
  // A bad limit and a state directory that does not exist: neither may be acted on.
  const std::string missing = state_dir() + "/not-yet";
  for (const std::vector<std::string>& env :
       std::vector<std::vector<std::string>>{{}, {"GPUSLICE_MEMORY_LIMIT=bogus", "GPUSLICE_STATE_DIR=" + missing}}) {
    SCOPED_TRACE(::testing::PrintToString(env));
    const ProcessResult t = RunShimmed({"/bin/true"}, env);
    EXPECT_EQ(t.exit_code, 0) << Describe(t);
    EXPECT_EQ(t.out, "");
    EXPECT_EQ(t.err, "");
    const ProcessResult sh = RunShimmed({"/bin/sh", "-c", "echo hi"}, env);
    EXPECT_EQ(sh.exit_code, 0) << Describe(sh);
    EXPECT_EQ(sh.out, "hi\n");
    EXPECT_EQ(sh.err, "");
  }
  EXPECT_TRUE(StateDirEntries().empty()) << "the shim created something without a CUDA call";
  EXPECT_NE(access(missing.c_str(), F_OK), 0);
}

TEST_F(ShimInertnessTest, LookingUpCudaFunctionsWithoutCallingThemCreatesNothing) {
  const ProcessResult r = RunShimmed({App("dlsym"), "rtld-next"}, {"GPUSLICE_MEMORY_LIMIT=bogus"});
  EXPECT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_EQ(r.err, "");
  EXPECT_TRUE(StateDirEntries().empty());
}

// The dynamic dependencies ldd lists for libgpuslice.so, by file name.
std::vector<std::string> Dependencies(const std::string& ldd) {
  std::vector<std::string> names;
  std::istringstream in(ldd);
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line);
    std::string first;
    words >> first;
    if (!first.empty()) names.push_back(first.substr(first.find_last_of('/') + 1));
  }
  return names;
}

TEST_F(ShimInertnessTest, TheLibraryDependsOnGlibcAlone) {
#ifdef GPUSLICE_SANITIZER_BUILD
  GTEST_SKIP() << "sanitizer build (" GPUSLICE_SANITIZER_BUILD
                  "): the shim depends on the sanitizer runtime "
                  "and the shared libstdc++";
#endif
  const ProcessResult r = gpuslice::testing::Run({"/usr/bin/ldd", ShimPath()});
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  const std::regex glibc(R"((linux-vdso|libc|libm|libdl|libpthread|librt|ld-linux[-\w]*)\.so(\.\d+)*)");
  for (const std::string& name : Dependencies(r.out))
    EXPECT_TRUE(std::regex_match(name, glibc)) << name << " is not part of glibc:\n" << r.out;
  for (const char* forbidden : {"libstdc++", "libgcc_s", "libfmt", "libboost"})
    EXPECT_THAT(r.out, Not(HasSubstr(forbidden)));
}

TEST_F(ShimInertnessTest, TheLibraryExportsOnlyTheFunctionsItInterposes) {
  const ProcessResult r = gpuslice::testing::Run({"/usr/bin/nm", "-D", "--defined-only", ShimPath()});
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  const std::regex intended(R"((cu|nvml)[A-Za-z0-9_]+|dlsym)");
  std::vector<std::string> exported;
  std::istringstream in(r.out);
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line);
    std::string address, type, name;
    words >> address >> type >> name;
    if (name.empty()) continue;
    EXPECT_TRUE(std::regex_match(name, intended)) << "unexpected export " << name << " (" << type << ")";
    EXPECT_EQ(type, "T") << name << " should be a function";
    exported.push_back(name);
  }
  EXPECT_THAT(exported, ::testing::IsSupersetOf({"dlsym", "cuInit", "cuGetProcAddress", "cuGetProcAddress_v2",
                                                 "cuMemAlloc_v2", "cuMemAllocAsync_ptsz", "cuMemCreate",
                                                 "cuMemGetInfo_v2", "nvmlDeviceGetMemoryInfo_v2"}));
}

// Signal dispositions, umask and thread count from /proc/<pid>/status.
std::map<std::string, std::string> ProcessTraits(pid_t pid) {
  std::map<std::string, std::string> traits;
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(status, line);) {
    const std::string key = line.substr(0, line.find(':'));
    if (key == "SigCgt" || key == "SigIgn" || key == "SigBlk" || key == "Umask" || key == "Threads")
      traits[key] = line.substr(line.find(':') + 1);
  }
  return traits;
}

TEST_F(ShimInertnessTest, AWorkingShimLeavesSignalHandlersUmaskAndThreadsAlone) {
  const std::vector<std::string> argv = {App("direct"), "alloc", "--chunk", "256Mi", "--count", "2", "--hold", "60"};
  Subprocess plain(argv, {"LD_LIBRARY_PATH=" + SimLibDir()});
  ASSERT_TRUE(plain.WaitForOutput("\"event\":\"holding\"")) << plain.StdoutSoFar();
  auto shimmed = StartShimmed(argv, {"GPUSLICE_MEMORY_LIMIT=1Gi"});
  ASSERT_TRUE(shimmed->WaitForOutput("\"event\":\"holding\"")) << shimmed->StdoutSoFar();
  const auto traits = ProcessTraits(plain.pid());
  EXPECT_EQ(traits.size(), 5u);
  EXPECT_EQ(ProcessTraits(shimmed->pid()), traits);
  EXPECT_EQ(Stop(plain).exit_code, 0);
  EXPECT_EQ(Stop(*shimmed).exit_code, 0);
}

}  // namespace
}  // namespace gpuslice::testing
