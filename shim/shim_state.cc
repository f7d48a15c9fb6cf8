#include "shim/shim_state.h"

#include <pthread.h>
#include <sys/random.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <string>

#include "broker/lock_fault.h"
#include "broker/uuid.h"
#include "common/mutex_lock.h"
#include "shim/compute_monitor.h"
#include "shim/device_warnings.h"
#include "shim/log.h"
#include "shim/real_driver.h"

namespace gpuslice::shim {
namespace {

Mutex g_create_mutex;  // one ShimState::Create at a time
std::atomic<bool> g_failed{false};
// UUIDs of ledgers opened through CUDA ordinals, so NVML's view uses the same ledger.
Mutex g_uuid_mutex;
std::map<std::string, broker::LedgerId>* const g_ledger_by_uuid PT_GUARDED_BY(g_uuid_mutex) =
    new std::map<std::string, broker::LedgerId>();

// A process without GPUSLICE_TENANT is a tenant of its own. PIDs repeat across containers, so
// the name is random rather than derived from the PID.
std::string OwnTenantName() {
  uint64_t id = 0;
  if (getrandom(&id, sizeof id, 0) != sizeof id) id = static_cast<uint64_t>(getpid()) * 0x9E3779B97F4A7C15ULL;
  char name[32];
  std::snprintf(name, sizeof name, "proc-%016llx", static_cast<unsigned long long>(id));
  return name;
}

// A fork() while another thread holds one of the shim's process-wide locks (loading the real
// driver, attaching to the broker at its first CUDA call, g_uuid_mutex) would leave it locked for
// ever in the child, where that thread does not exist: the child's first CUDA call would then
// never return. So fork() waits until none is held, as glibc's malloc does for its arenas, and
// all are released on each side after it. They are taken in the order the code nests them (a
// thread attaching never loads the driver, and none waits for another while holding
// g_uuid_mutex), so the fork cannot deadlock with such a thread.
void BeforeFork() NO_THREAD_SAFETY_ANALYSIS {
  // sabotage-point: fork-locks-not-held.take
  LockLoadersForFork();
  g_create_mutex.Lock();
  g_uuid_mutex.Lock();
}

void ReleaseForkLocks() NO_THREAD_SAFETY_ANALYSIS {
  // sabotage-point: fork-locks-not-held.release
  g_uuid_mutex.Unlock();
  g_create_mutex.Unlock();
  UnlockLoadersAfterFork();
}

void ParentAfterFork() { ReleaseForkLocks(); }

void ChildAfterFork() NO_THREAD_SAFETY_ANALYSIS {
  ShimState* parent = ShimState::instance_.exchange(nullptr);
  // sabotage-point: fork-child-keeps-parent-registration
  if (parent) parent->ForgetAfterFork();  // the parent's object is left behind, not freed
  g_failed.store(false);
  g_ledger_by_uuid->clear();
  ReleaseForkLocks();
}

// Registered when the library is loaded, the one thing its loading does: only a registration
// that precedes every fork() closes the race. Registered at the first CUDA call instead, a fork()
// that began just before (glibc runs only the handlers registered when its fork started) found
// none, and the thread then took the attach's lock before the process was copied; under TSan,
// whose pthread_once does not survive a fork, the child even waited on the registration itself.
// In a process that never uses CUDA the handlers take four locks nobody else ever takes.
// sabotage-point: fork-handlers-registered-at-first-call.at-load
__attribute__((constructor)) void RegisterForkHandlers() {
  pthread_atfork(BeforeFork, ParentAfterFork, ChildAfterFork);
}

// Every later call retries the ledger (and fails the same way): one line, not one per call.
void ReportLedgerErrorOnce(const std::string& error) {
  static std::atomic<bool> reported{false};
  if (!reported.exchange(true)) LogError("%s", error.c_str());
}

__attribute__((destructor)) void ShutdownAtExit() {
  // Only the broker: calling the driver while the process exits is undefined behaviour.
  if (ShimState* state = ShimState::instance_.load()) state->Shutdown();
}

}  // namespace

std::atomic<ShimState*> ShimState::instance_{nullptr};

ShimState* ShimState::GetSlow() {
  // sabotage-point: fork-handlers-registered-at-first-call.first-call
  if (g_failed.load(std::memory_order_acquire)) return nullptr;
  MutexLock lock(&g_create_mutex);
  if (ShimState* s = ShimState::instance_.load()) return s;
  if (g_failed.load()) return nullptr;
  ShimState* s = nullptr;
  try {
    s = Create();
  } catch (...) {
    return nullptr;  // out of memory: this call fails, and a later one tries again
  }
  if (!s) {
    g_failed.store(true, std::memory_order_release);
    return nullptr;
  }
  ShimState::instance_.store(s, std::memory_order_release);
  return s;
}

ShimState* ShimState::Create() {
  // A lock of the segment in a bad state is reported as one line of the shim's (the broker then
  // fails closed on what that lock guards: broker/lock_fault.h).
  broker::SetFaultReporter([](const char* line) { LogError("%s", line); });
  auto state = std::unique_ptr<ShimState>(new ShimState());
  bool valid = false;
  state->options_ = ProcessOptions(&valid);
  // sabotage-point: fail-open-config
  if (!valid) return nullptr;  // already reported
  Result<std::unique_ptr<broker::Broker>> attached = broker::Broker::Attach(state->options_.state_dir);
  if (!attached.ok()) {
    LogError("%s (GPUSLICE_STATE_DIR=%s)", attached.message().c_str(), state->options_.state_dir.c_str());
    return nullptr;
  }
  state->broker_ = std::move(attached).value();
  const std::string tenant = state->options_.tenant.empty() ? OwnTenantName() : state->options_.tenant;
  if (const Status registered = state->broker_->Register(tenant); !registered.ok()) {
    LogError("%s", registered.message().c_str());
    return nullptr;
  }
  return state.release();
}

DriverResult<broker::LedgerId> ShimState::LedgerForDevice(CUdevice device) {
  if (device < 0 || device >= kMaxOrdinals) return CUDA_ERROR_INVALID_DEVICE;
  // The cache holds ledger + 1: 0 (not opened yet) reads as no ledger.
  if (const auto cached = broker::LedgerId::From(ledger_by_ordinal_[device].load(std::memory_order_acquire) - 1))
    return *cached;
  MutexLock lock(&ledger_mutex_);
  if (const auto cached = broker::LedgerId::From(ledger_by_ordinal_[device].load() - 1)) return *cached;
  const RealDriver* real = Real();
  CUuuid uuid{};
  size_t total = 0;
  if (CUresult rc = real->cuDeviceGetUuid_v2(&uuid, device); rc != CUDA_SUCCESS) return rc;
  if (CUresult rc = real->cuDeviceTotalMem_v2(&total, device); rc != CUDA_SUCCESS) return rc;
  const Result<broker::MemoryShare> share = options_.ShareFor(device, total);
  if (!share.ok()) {
    ReportLedgerErrorOnce(share.message());
    return kFailClosed;
  }
  uint8_t bytes[16];
  std::memcpy(bytes, uuid.bytes, sizeof bytes);
  const Result<broker::LedgerId> ledger_opened = broker_->OpenLedger(bytes, total, *share);
  if (!ledger_opened.ok()) {
    ReportLedgerErrorOnce(ledger_opened.message());
    return kFailClosed;
  }
  const broker::LedgerId opened = *ledger_opened;
  PresetComputeShare(opened);
  // Once per GPU and process: the ledger is opened here once (cached below). A warning that
  // cannot be composed (no memory) is dropped: it must never fail the call, nor throw across it.
  try {
    const std::string gpu_uuid = broker::FormatUuid(bytes);
    if (const std::string warning = OversizedQuotaWarning(options_, device, total, gpu_uuid); !warning.empty())
      LogError("%s", warning.c_str());
    WarnOfUnaccountedMemory(device, opened, gpu_uuid);
  } catch (...) {
  }
  // Without memory for the entry the call fails as a driver's would; the ledger, already open, is
  // found again by the next call.
  try {
    MutexLock uuid_lock(&g_uuid_mutex);
    g_ledger_by_uuid->insert_or_assign(broker::FormatUuid(bytes), opened);
  } catch (...) {
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  ledger_by_ordinal_[device].store(opened.value() + 1, std::memory_order_release);
  return opened;
}

void ShimState::WarnOfUnaccountedMemory(CUdevice device, broker::LedgerId ledger, const std::string& gpu_uuid) {
  // The real driver's figures need a context on that device; a first use without one (a
  // cuMemCreate for another device) goes without the check rather than create a context.
  const RealDriver* real = Real();
  CUcontext context = nullptr;
  CUdevice current = -1;
  size_t free = 0, total = 0;
  if (real->cuCtxGetCurrent(&context) != CUDA_SUCCESS || !context || real->cuCtxGetDevice(&current) != CUDA_SUCCESS ||
      current != device || real->cuMemGetInfo_v2(&free, &total) != CUDA_SUCCESS)
    return;
  DeviceMemorySeen seen;
  seen.gpu_uuid = gpu_uuid;
  seen.device_free = free;
  seen.device_total = total;
  seen.accounted = broker_->GpuUsed(ledger);
  seen.processes = static_cast<uint64_t>(broker_->GpuProcesses(ledger));
  seen.tenant_used = broker_->Used(ledger);
  seen.tenant_quota = broker_->Quota(ledger);
  seen.tenant = options_.tenant;
  seen.state_dir = options_.state_dir;
  if (const std::string warning = UnaccountedMemoryWarning(seen); !warning.empty()) LogError("%s", warning.c_str());
}

DriverResult<broker::LedgerId> ShimState::LedgerForCurrentContext() {
  CUdevice device = 0;
  if (CUresult rc = Real()->cuCtxGetDevice(&device); rc != CUDA_SUCCESS) return rc;
  return LedgerForDevice(device);
}

DriverResult<broker::LedgerId> ShimState::LedgerAndContext(CUcontext* context) {
  const RealDriver* real = Real();
  if (CUresult rc = real->cuCtxGetCurrent(context); rc != CUDA_SUCCESS) return rc;
  if (!*context) return CUDA_ERROR_INVALID_CONTEXT;
  CUdevice device = 0;
  if (CUresult rc = real->cuCtxGetDevice(&device); rc != CUDA_SUCCESS) return rc;
  return LedgerForDevice(device);
}

// With no memory left to record it, the charge stays with the tenant until the process exits (the
// broker returns a process's charges then): the quota errs on the safe side, and the allocation,
// which the driver made, is not failed after the fact.
void ShimState::Record(AllocationMap& map, uint64_t key, Charge charge) {
  try {
    Charge stale;
    if (map.Insert(key, charge, &stale)) Credit(stale);
  } catch (...) {
  }
}

void ShimState::Credit(const Charge& charge) {
  if (charge.ledger) broker_->Release(*charge.ledger, charge.bytes);
}

ShimState::ContextCharges ShimState::TakeContextCharges(CUcontext context) {
  ContextCharges taken;
  if (!context) return taken;
  allocations_.TakeContext(context, &taken.allocation_keys, &taken.allocations);
  arrays_.TakeContext(context, &taken.array_keys, &taken.arrays);
  return taken;
}

void ShimState::CreditContextCharges(const ContextCharges& charges) {
  for (const Charge& c : charges.allocations) Credit(c);
  for (const Charge& c : charges.arrays) Credit(c);
}

void ShimState::RestoreContextCharges(const ContextCharges& charges) {
  for (size_t i = 0; i < charges.allocations.size(); ++i)
    Record(allocations_, charges.allocation_keys[i], charges.allocations[i]);
  for (size_t i = 0; i < charges.arrays.size(); ++i) Record(arrays_, charges.array_keys[i], charges.arrays[i]);
}

// Without memory for its bookkeeping, the lookup fails as a refused ledger does (the error's
// short message fits in the string itself: nothing is allocated), and nothing throws across the
// NVML hook.
Result<broker::LedgerId> ShimState::LedgerForUuid(const uint8_t (&uuid)[16], uint64_t device_total) {
  try {
    return LedgerForUuidOrThrow(uuid, device_total);
  } catch (...) {
    return Status::ResourceExhausted("out of memory");
  }
}

Result<broker::LedgerId> ShimState::LedgerForUuidOrThrow(const uint8_t (&uuid)[16], uint64_t device_total) {
  const std::string key = broker::FormatUuid(uuid);
  {
    MutexLock lock(&g_uuid_mutex);
    if (auto it = g_ledger_by_uuid->find(key); it != g_ledger_by_uuid->end()) return it->second;
  }
  // Another process of the tenant may have opened this GPU's ledger through CUDA: use it as is.
  if (const std::optional<broker::LedgerId> found = broker_->FindLedger(uuid)) return *found;
  // Seen only through NVML (nvidia-smi never creates a context), a GPU cannot be matched to a
  // CUDA ordinal: with per-ordinal limits its quota is unknown here, so report the device as the
  // driver does rather than set a quota that CUDA would then contradict.
  if (!options_.memory_limit_per_ordinal.empty() || !options_.memory_request_per_ordinal.empty())
    return Status::NotFound("gpuslice: " + key + " has per-ordinal limits and is seen through NVML alone");
  Result<broker::MemoryShare> share = options_.ShareFor(-1, device_total);
  if (!share.ok()) {
    ReportLedgerErrorOnce(share.message());
    return std::move(share).status();
  }
  Result<broker::LedgerId> ledger_opened = broker_->OpenLedger(uuid, device_total, *share);
  if (!ledger_opened.ok()) {
    ReportLedgerErrorOnce(ledger_opened.message());
    return ledger_opened;
  }
  MutexLock lock(&g_uuid_mutex);
  g_ledger_by_uuid->insert_or_assign(key, *ledger_opened);
  return ledger_opened;
}

void ShimState::Shutdown() {
  // The monitor writes into this process's slot: it stops first. One that cannot be stopped (it
  // is stuck in the driver) keeps the slot, which is reaped once the process is gone.
  if (!StopComputeMonitor(this)) return;
  for (LaunchTracker* tracker : Trackers()) tracker->gate()->Leave();
  broker_->Unregister();
}

void ShimState::ForgetAfterFork() {
  // Only what must not outlive the parent: another thread may have held a map's lock at the
  // fork, so the child never touches the parent's maps (the object is simply abandoned).
  broker_->ForgetAfterFork();
}

}  // namespace gpuslice::shim
