// The shared segment is checked, not trusted: real processes under LD_PRELOAD, over the
// simulated driver, keep working or are refused with one clear line when any single field of the
// segment is corrupted under them — a header field, a high-water mark, a process's tenant index,
// a GPU's holder, the bytes of a lock. No process crashes, and the worst outcome is a refusal.
//
// Each test starts a "victim" tenant holding 256 MiB of its 1 GiB quota, corrupts one field of
// the state file it uses, then runs newcomers (of the victim's tenant and of another) and finally
// stops the victim, which frees and unregisters through the corrupted segment.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "broker/segment_layout.h"
#include "tests/support/shim_fixture.h"

namespace gpuslice::testing {
namespace {

using broker::Segment;

const std::vector<std::string> kVictim = {"GPUSLICE_TENANT=victim", "GPUSLICE_MEMORY_LIMIT=1Gi"};
const std::vector<std::string> kOther = {"GPUSLICE_TENANT=other", "GPUSLICE_MEMORY_LIMIT=1Gi"};

class ShimSegmentCorruptionTest : public ShimTest {
 protected:
  void StartVictim() {
    victim_ = StartHolder({App("direct"), "alloc", "--chunk", "256Mi", "--count", "1"}, kVictim);
    ASSERT_EQ(TenantUsed("victim"), 256 * kMi);
  }

  std::string StateFile() const { return state_dir() + "/" + broker::kStateFileName; }

  std::unique_ptr<Segment> ReadSegment() const {
    auto segment = std::make_unique<Segment>();
    const int fd = open(StateFile().c_str(), O_RDONLY);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(pread(fd, static_cast<void*>(segment.get()), sizeof(Segment), 0), static_cast<ssize_t>(sizeof(Segment)));
    close(fd);
    return segment;
  }

  void WriteAt(size_t offset, const void* data, size_t size) const {
    const int fd = open(StateFile().c_str(), O_WRONLY);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(pwrite(fd, data, size, static_cast<off_t>(offset)), static_cast<ssize_t>(size));
    close(fd);
  }
  template <typename T>
  void WriteValueAt(size_t offset, T value) const {
    WriteAt(offset, &value, sizeof value);
  }

  // Index of the tenant named `name` and of the victim's process slot, read from the file.
  int TenantIndex(const std::string& name) const {
    auto segment = ReadSegment();
    for (int t = 0; t < broker::kMaxTenants; ++t)
      if (segment->tenants[t].name_length == name.size() &&
          std::memcmp(segment->tenants[t].name, name.data(), name.size()) == 0)
        return t;
    ADD_FAILURE() << "no tenant " << name;
    return 0;
  }
  int VictimSlot() const {
    auto segment = ReadSegment();
    for (int p = 0; p < broker::kMaxProcesses; ++p)
      if (segment->processes[p].state.load() == 1 && segment->processes[p].pid.load() == victim_->pid()) return p;
    ADD_FAILURE() << "no process slot for the victim";
    return 0;
  }
  static size_t LedgerOffset(int tenant, int gpu) {
    return offsetof(Segment, ledgers) +
           sizeof(broker::LedgerEntry) * static_cast<size_t>(tenant * broker::kMaxGpus + gpu);
  }
  // The victim's ledger is on GPU entry 0 (the only GPU the simulator has here).
  size_t VictimLedgerMutex() const {
    return LedgerOffset(TenantIndex("victim"), 0) + offsetof(broker::LedgerEntry, mutex);
  }

  // A newcomer that allocates `count` × 256 MiB; it must not crash and prints at most one-line
  // messages of gpuslice's.
  ProcessResult Newcomer(const std::vector<std::string>& tenant, int count) const {
    const ProcessResult r =
        RunShimmed({App("direct"), "alloc", "--chunk", "256Mi", "--count", std::to_string(count)}, tenant, 120000);
    EXPECT_EQ(r.signal, 0) << Describe(r);
    EXPECT_NE(r.exit_code, -1) << Describe(r);
    return r;
  }
  static int Allocated(const ProcessResult& r) { return ResultOf(r).value("allocated", -1); }

  // The victim survived everything so far, and frees and exits through the corrupted segment.
  void ExpectVictimUnharmed() {
    ASSERT_TRUE(victim_);
    const ProcessResult r = Stop(*victim_);
    EXPECT_EQ(r.signal, 0) << "the victim crashed: " << Describe(r);
    EXPECT_EQ(r.exit_code, 0) << Describe(r);
    EXPECT_EQ(ResultOf(r).value("allocated", -1), 1) << Describe(r);
  }

  // Exactly one line of gpuslice's in `r` contains every one of `parts`.
  static void ExpectClearLine(const ProcessResult& r, const std::vector<std::string>& parts) {
    int matching = 0;
    for (const std::string& line : GpusliceLines(r.err)) {
      bool all = true;
      for (const std::string& part : parts) all = all && line.find(part) != std::string::npos;
      matching += all;
    }
    EXPECT_EQ(matching, 1) << "expected one gpuslice line with every one of the parts; " << Describe(r);
  }

  std::unique_ptr<Subprocess> victim_;
};

// --- header fields: a newcomer is refused at attach; the live victim carries on ---

struct HeaderField {
  std::string name;
  size_t offset;
  uint32_t value;
  std::string refusal;  // in the newcomer's line
};

std::ostream& operator<<(std::ostream& os, const HeaderField& f) { return os << f.name; }

class ShimSegmentHeaderCorruptionTest : public ShimSegmentCorruptionTest,
                                        public ::testing::WithParamInterface<HeaderField> {};

TEST_P(ShimSegmentHeaderCorruptionTest, NewcomersAreRefusedWithOneLineAndTheLiveTenantCarriesOn) {
  StartVictim();
  WriteValueAt(GetParam().offset, GetParam().value);
  for (const auto& tenant : {kVictim, kOther}) {
    const ProcessResult r = Newcomer(tenant, 1);
    EXPECT_EQ(Allocated(r), 0) << Describe(r);
    ExpectClearLine(r, {StateFile(), GetParam().refusal, "remove it"});
  }
  ExpectVictimUnharmed();
}

INSTANTIATE_TEST_SUITE_P(
    Fields, ShimSegmentHeaderCorruptionTest,
    ::testing::Values(
        HeaderField{"LayoutVersion", offsetof(broker::SegmentHeader, layout_version), 99, "layout version 99"},
        HeaderField{"SegmentSize", offsetof(broker::SegmentHeader, segment_size), 4096, "its header says 4096"},
        HeaderField{"HeaderSize", offsetof(broker::SegmentHeader, header_size), 7, "truncated or corrupt"},
        HeaderField{"TenantCapacity", offsetof(broker::SegmentHeader, max_tenants), 1u << 30, "tenant table capacity"},
        HeaderField{"GpuCount", offsetof(broker::SegmentHeader, gpu_high_water), 0xffffffffu, "GPU count"},
        HeaderField{"TenantCount", offsetof(broker::SegmentHeader, tenant_high_water), 0xffffffffu, "tenant count"},
        HeaderField{"ProcessCount", offsetof(broker::SegmentHeader, process_high_water), 0x7fffffffu, "process count"}),
    [](const ::testing::TestParamInfo<HeaderField>& info) { return info.param.name; });

// --- the magic: a live segment is never initialised again ---

TEST_F(ShimSegmentCorruptionTest, ZeroedMagicOfALiveSegmentIsRefusedNotInitialisedAgain) {
  StartVictim();
  WriteValueAt<uint64_t>(offsetof(broker::SegmentHeader, magic), 0);
  // Initialised again, the file would give a newcomer of the victim's tenant a fresh ledger: the
  // whole 1 GiB on top of the 256 MiB the victim holds.
  const ProcessResult r = Newcomer(kVictim, 4);
  EXPECT_EQ(Allocated(r), 0) << Describe(r);
  ExpectClearLine(r, {StateFile(), "no valid magic", "still use it", "remove it"});
  ExpectVictimUnharmed();
}

TEST_F(ShimSegmentCorruptionTest, ControlZeroedMagicOfAFileNoProcessUsesIsInitialisedAgain) {
  // The same bytes without a live process are what a creator killed before its last store leaves:
  // the next process initialises the file, and the tenant gets its whole quota.
  StartVictim();
  ExpectVictimUnharmed();
  WriteValueAt<uint64_t>(offsetof(broker::SegmentHeader, magic), 0);
  const ProcessResult r = Newcomer(kVictim, 4);
  EXPECT_EQ(Allocated(r), 4) << Describe(r);
  EXPECT_TRUE(GpusliceLines(r.err).empty()) << Describe(r);
}

// --- cross-references between entries ---

TEST_F(ShimSegmentCorruptionTest, ForgedTenantIndexOfAProcessCrashesNoOne) {
  StartVictim();
  const size_t tenant_field = offsetof(Segment, processes) + sizeof(broker::ProcessEntry) * VictimSlot() +
                              offsetof(broker::ProcessEntry, tenant);
  for (int32_t forged : {0x7fffffff, -1, broker::kMaxTenants}) {
    WriteValueAt<int32_t>(tenant_field, forged);
    // Newcomers reap (the victim is alive: not reaped) and scan the process table.
    EXPECT_EQ(Allocated(Newcomer(kOther, 2)), 2);
    EXPECT_LE(Allocated(Newcomer(kVictim, 4)), 4);
    (void)BrokerSnapshot();
  }
  // Killed, the victim is reaped by the next newcomer with a tenant index that names no tenant:
  // its charge cannot be returned anywhere (the victim's ledger keeps it: fail closed).
  victim_->Kill(SIGKILL);
  victim_->Wait();
  victim_.reset();
  const ProcessResult r = Newcomer(kVictim, 4);
  EXPECT_GE(Allocated(r), 3) << Describe(r);
}

// Depends on broker/scheduler.cc (the compute scheduler reads `holder` at every gated launch).
TEST_F(ShimSegmentCorruptionTest, ForgedHolderOfTheGpuCrashesNoLauncher) {
  StartVictim();
  const size_t holder = offsetof(Segment, gpus) + offsetof(broker::GpuEntry, holder);
  for (uint32_t forged : {0x7fffffffu, 0xffffffffu, static_cast<uint32_t>(broker::kMaxTenants + 1)}) {
    WriteValueAt<uint32_t>(holder, forged);
    const ProcessResult r =
        RunShimmed({App("workload"), "compute", "--kernels", "3", "--kernel-us", "100"}, kOther, 120000);
    EXPECT_EQ(r.signal, 0) << "holder " << forged << ": " << Describe(r);
    for (const std::string& line : GpusliceLines(r.err)) EXPECT_EQ(line.find('\n'), std::string::npos);
  }
  ExpectVictimUnharmed();
}

// --- lock bytes: the GPU's ledger fails closed for its tenant, one line, no abort ---

struct LockBytes {
  std::string name;
  size_t offset;  // within the mutex
  uint32_t value;
  // False where the victim's own free and exit would each wait out the lock timeout (10 s):
  // it is then checked alive and killed instead.
  bool stop_victim = true;
};

std::ostream& operator<<(std::ostream& os, const LockBytes& l) { return os << l.name; }

class ShimSegmentLedgerLockTest : public ShimSegmentCorruptionTest, public ::testing::WithParamInterface<LockBytes> {};

TEST_P(ShimSegmentLedgerLockTest, OnlyThatTenantOnThatGpuIsRefusedWithOneLine) {
  StartVictim();
  WriteValueAt<uint32_t>(VictimLedgerMutex() + GetParam().offset, GetParam().value);
  const ProcessResult victim_newcomer = Newcomer(kVictim, 1);
  EXPECT_EQ(Allocated(victim_newcomer), 0) << Describe(victim_newcomer);
  ExpectClearLine(victim_newcomer, {"ledger lock of tenant 'victim'", StateFile(), "refused", "remove"});
  // Another tenant's ledger on the same GPU is another lock: unaffected.
  const ProcessResult other = Newcomer(kOther, 2);
  EXPECT_EQ(Allocated(other), 2) << Describe(other);
  EXPECT_TRUE(GpusliceLines(other.err).empty()) << Describe(other);
  if (GetParam().stop_victim) {
    ExpectVictimUnharmed();
  } else {
    EXPECT_FALSE(victim_->WaitForOutput("\"event\":\"result\"", 10)) << "the victim ended early";
    victim_->Kill(SIGKILL);
    EXPECT_EQ(victim_->Wait().signal, SIGKILL) << "the victim was alive until killed";
  }
}

INSTANTIATE_TEST_SUITE_P(Bytes, ShimSegmentLedgerLockTest,
                         ::testing::Values(
                             // glibc's type word: garbage is EINVAL (RobustLock used to abort() there), zero would lock
                             // as a process-private, non-robust mutex.
                             LockBytes{"GarbageKind", offsetof(pthread_mutex_t, __data.__kind), 0x41414141u},
                             LockBytes{"ZeroedKind", offsetof(pthread_mutex_t, __data.__kind), 0u},
                             // A lock word naming an owner that never unlocks: the lockers give up after 10 s.
                             LockBytes{"ForgedOwner", offsetof(pthread_mutex_t, __data.__lock), 0x00808080u, false}),
                         [](const ::testing::TestParamInfo<LockBytes>& info) { return info.param.name; });

TEST_F(ShimSegmentCorruptionTest, CorruptTableLockRefusesNewcomersWithOneLineAndAbortsNoOne) {
  StartVictim();
  WriteValueAt<uint32_t>(offsetof(broker::SegmentHeader, table_mutex) + offsetof(pthread_mutex_t, __data.__kind),
                         0x41414141u);
  const ProcessResult r = Newcomer(kOther, 1);
  EXPECT_EQ(Allocated(r), 0) << Describe(r);
  EXPECT_EQ(ResultOf(r).value("init", ""), "CUDA_ERROR_NOT_PERMITTED") << Describe(r);
  ExpectClearLine(r, {"table lock", StateFile(), "corrupt", "remove"});
  ExpectVictimUnharmed();
}

}  // namespace
}  // namespace gpuslice::testing
