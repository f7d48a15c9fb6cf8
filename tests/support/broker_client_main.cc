// gpuslice-broker-test-client: one broker client process for tests that need an executable (the
// PID-namespace test runs it under `unshare --pid --fork`). Attaches, registers, opens a ledger,
// reserves, prints "ready pid=<its own pid> ..." and then holds (until killed) or unregisters.
//
//   gpuslice-broker-test-client --state DIR --tenant NAME [--quota BYTES] [--total BYTES]
//                               [--uuid GPU-...] [--reserve BYTES] [--hold] [--hold-sched-lock]
//
// --hold-sched-lock: takes the GPU's scheduler lock before "ready" and holds it until killed, as
// a process stopped (SIGSTOP, a debugger) inside a grant decision would.
#include <pthread.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "broker/broker.h"
#include "broker/checked_index.h"
#include "broker/uuid.h"

namespace {

int Fail(const std::string& message) {
  std::fprintf(stderr, "gpuslice-broker-test-client: %s\n", message.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  using gpuslice::broker::Broker;
  std::string state_dir, tenant = "tenant", uuid_text = "GPU-00000000-0000-0000-0000-000000000001";
  uint64_t quota = gpuslice::broker::kUnlimited, total = 80ULL << 30, reserve = 0;
  bool hold = false, hold_sched_lock = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--hold") {
      hold = true;
    } else if (arg == "--hold-sched-lock") {
      hold = hold_sched_lock = true;
    } else if (arg == "--state" && has_value) {
      state_dir = argv[++i];
    } else if (arg == "--tenant" && has_value) {
      tenant = argv[++i];
    } else if (arg == "--uuid" && has_value) {
      uuid_text = argv[++i];
    } else if (arg == "--quota" && has_value) {
      quota = std::strtoull(argv[++i], nullptr, 10);
    } else if (arg == "--total" && has_value) {
      total = std::strtoull(argv[++i], nullptr, 10);
    } else if (arg == "--reserve" && has_value) {
      reserve = std::strtoull(argv[++i], nullptr, 10);
    } else {
      return Fail("unknown or incomplete argument " + arg);
    }
  }
  if (state_dir.empty()) return Fail("--state DIR is required");
  uint8_t uuid[16];
  if (!gpuslice::broker::ParseUuid(uuid_text, uuid)) return Fail("bad --uuid " + uuid_text);

  auto attached = Broker::Attach(state_dir);
  if (!attached.ok()) return Fail(attached.message());
  const std::unique_ptr<Broker> broker = std::move(attached).value();
  if (gpuslice::Status registered = broker->Register(tenant); !registered.ok()) return Fail(registered.message());
  const gpuslice::Result<gpuslice::broker::LedgerId> opened = broker->OpenLedger(uuid, total, quota);
  if (!opened.ok()) return Fail(opened.message());
  const gpuslice::broker::LedgerId ledger = *opened;
  if (reserve > 0 && !broker->Reserve(ledger, reserve)) return Fail("reservation refused");
  // Never unlocked: the process is killed holding it.
  if (hold_sched_lock && pthread_mutex_lock(&At(*broker->segment(), ledger.gpu()).sched_mutex.mutex.native) != 0)
    return Fail("cannot take the scheduler lock");
  std::printf("ready pid=%d ledger=%d used=%llu\n", static_cast<int>(getpid()), ledger.value(),
              static_cast<unsigned long long>(broker->Used(ledger)));
  std::fflush(stdout);
  if (hold) {
    while (true) pause();
  }
  broker->Unregister();
  return 0;
}
