// libFuzzer target: opening and using a state file of arbitrary bytes (broker/). Whatever the
// file holds, attaching must either refuse it with one line naming the file, or map it and then
// register, open a ledger, charge, release, reap and take a snapshot without crashing, hanging
// or leaving a tenant unlimited: a ledger opened with a 1 MiB quota refuses a 2 MiB charge.
//
// Input: byte 0 picks how the file is made.
//   even: the rest of the input is the whole file (short, so mostly refused by the header checks);
//   odd:  the rest is a list of patches laid over a valid, populated segment (one tenant with a
//         charge, a process entry left registered by a process that is gone): 3 bytes of offset
//         (little-endian, modulo the file size), 1 byte of length (1 to 16), then the bytes. This
//         reaches every field — indices, counts, high-water marks, mutex bytes, magic, version.
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "broker/broker.h"
#include "broker/lock_fault.h"
#include "broker/segment_layout.h"
#include "broker/snapshot.h"

namespace {

using gpuslice::broker::Broker;
using gpuslice::broker::Segment;

constexpr uint8_t kUuid[16] = {0x10, 0x32, 0x54, 0x76, 0x98, 0xba, 0xdc, 0xfe, 1, 2, 3, 4, 5, 6, 7, 8};
constexpr uint64_t kDeviceTotal = 80ULL << 30;
constexpr uint64_t kQuota = 1ULL << 20;

std::string g_dir;
std::string g_file;
std::vector<uint8_t>* g_template = nullptr;

[[noreturn]] void Fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "state_file_fuzzer: %s: %s\n", what, detail.c_str());
  std::abort();
}

// A refusal is one line that says it is gpuslice's.
void CheckMessage(const std::string& error) {
  if (error.rfind("gpuslice: ", 0) != 0 || error.find('\n') != std::string::npos) Fail("bad message", error);
}

std::vector<uint8_t> ReadFile(const std::string& path) {
  std::vector<uint8_t> bytes(sizeof(Segment));
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 || pread(fd, bytes.data(), bytes.size(), 0) != static_cast<ssize_t>(bytes.size())) Fail("read", path);
  close(fd);
  return bytes;
}

void WriteFile(const uint8_t* data, size_t size) {
  unlink(g_file.c_str());
  const int fd = open(g_file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0660);
  if (fd < 0 || fchmod(fd, 0660) != 0) Fail("create", g_file);
  for (size_t done = 0; done < size;) {
    const ssize_t n = write(fd, data + done, size - done);
    if (n <= 0) Fail("write", g_file);
    done += static_cast<size_t>(n);
  }
  close(fd);
}

void Exercise() {
  auto attached = Broker::Attach(g_dir);
  if (!attached.ok()) {
    CheckMessage(attached.message());
    if (attached.message().find(g_dir) == std::string::npos) Fail("refusal does not name the file", attached.message());
    return;
  }
  std::unique_ptr<Broker> broker = std::move(attached).value();
  if (gpuslice::Status registered = broker->Register("fuzz-tenant"); !registered.ok()) {
    CheckMessage(registered.message());
  } else {
    const gpuslice::Result<gpuslice::broker::LedgerId> opened = broker->OpenLedger(kUuid, kDeviceTotal, kQuota);
    if (!opened.ok()) {
      CheckMessage(opened.message());
    } else {
      const gpuslice::broker::LedgerId ledger = *opened;
      if (broker->Reserve(ledger, 2 * kQuota)) Fail("unlimited", "a 1 MiB quota admitted 2 MiB");
      if (broker->Reserve(ledger, 4096)) broker->Release(ledger, 4096);
      (void)broker->Used(ledger);
      (void)broker->Quota(ledger);
      (void)broker->FindLedger(kUuid);
    }
    broker->ReapDeadProcesses();
  }
  if (auto snapshot = gpuslice::broker::TakeSnapshot(g_dir); !snapshot.ok()) CheckMessage(snapshot.message());
  broker.reset();
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // Lines about broken locks are expected here by the thousand; and a forged lock word must
  // cost milliseconds, not the 10 s a real process waits.
  gpuslice::broker::SetFaultReporter([](const char*) {});
  gpuslice::broker::SetLockTimeoutForTesting(20'000'000);
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/gpuslice-fuzz-XXXXXX";
  if (!mkdtemp(pattern.data())) Fail("mkdtemp", pattern);
  g_dir = pattern;
  g_file = g_dir + "/" + gpuslice::broker::kStateFileName;
  std::atexit([] {
    unlink(g_file.c_str());
    rmdir(g_dir.c_str());
  });
  // The template: a populated segment whose registered process is gone once it is copied.
  {
    auto attached = Broker::Attach(g_dir);
    if (!attached.ok()) Fail("template", attached.message());
    const std::unique_ptr<Broker> broker = std::move(attached).value();
    if (gpuslice::Status registered = broker->Register("fuzz-tenant"); !registered.ok())
      Fail("template", registered.message());
    const gpuslice::Result<gpuslice::broker::LedgerId> ledger = broker->OpenLedger(kUuid, kDeviceTotal, kQuota);
    if (!ledger.ok() || !broker->Reserve(*ledger, 65536)) Fail("template ledger", ledger.message());
    g_template = new std::vector<uint8_t>(ReadFile(g_file));
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  if ((data[0] & 1) == 0) {
    WriteFile(data + 1, size - 1);
  } else {
    std::vector<uint8_t> bytes = *g_template;
    for (size_t at = 1; at + 4 <= size;) {
      const size_t offset = (data[at] | data[at + 1] << 8 | data[at + 2] << 16) % bytes.size();
      const size_t length = data[at + 3] % 16 + 1;
      at += 4;
      for (size_t i = 0; i < length && at < size; ++i, ++at) bytes[(offset + i) % bytes.size()] = data[at];
    }
    WriteFile(bytes.data(), bytes.size());
  }
  Exercise();
  return 0;
}
