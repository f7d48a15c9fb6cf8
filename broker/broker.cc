#include "broker/broker.h"

#include <cstring>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <optional>
#include <string_view>

#include <fmt/format.h>

#include "broker/checked_index.h"
#include "broker/ledger.h"
#include "broker/lock_fault.h"
#include "broker/memory_requests.h"
#include "broker/segment_file.h"
#include "broker/tables.h"
#include "broker/uuid.h"
#include "common/printable.h"
#include "common/process_lock.h"
#include "common/robust_mutex.h"

namespace gpuslice::broker {
namespace {

constexpr uint32_t kInUse = static_cast<uint32_t>(EntryState::kInUse);
const char kNoMemory[] = "gpuslice: out of memory in the broker";

std::string Bytes(uint64_t bytes) {
  if (bytes == kUnlimited) return "unlimited";
  return fmt::format("{} bytes ({:.1f} MiB)", bytes, static_cast<double>(bytes) / (1 << 20));
}

MemoryShare ShareOf(const LedgerEntry& entry) { return {entry.request.load(), entry.quota.load()}; }

void SetShare(Segment* segment, LedgerId ledger, MemoryShare share) {
  At(*segment, ledger).quota.store(share.limit);
  SetRequest(segment, ledger, share.request);
}

// "a quota of 4 GiB" (no request), "a request of 2 GiB and a limit of 4 GiB".
std::string ShareText(MemoryShare share) {
  if (share.request == 0) return "a quota of " + Bytes(share.limit);
  return "a request of " + Bytes(share.request) + " and a limit of " + Bytes(share.limit);
}

std::string TenantName(const Segment& segment, int tenant) {
  const auto index = TenantIndex::From(tenant);
  if (!index) return "?";
  const TenantEntry& entry = At(segment, *index);
  return Printable(std::string_view(entry.name, NameLength(entry)));  // for messages: anyone's bytes
}

}  // namespace

Broker::Broker(std::unique_ptr<SegmentFile> file) : file_(std::move(file)), health_(std::make_unique<LedgerHealth>()) {}

Broker::~Broker() { Unregister(); }

Result<std::unique_ptr<Broker>> Broker::Attach(const std::string& state_dir) {
  try {
    Result<std::unique_ptr<SegmentFile>> file = OpenSegmentFile(state_dir, OpenMode::kCreateOrAttach);
    if (!file.ok()) return std::move(file).status();
    return std::unique_ptr<Broker>(new Broker(std::move(file).value()));
  } catch (...) {
    return Status::Error(kNoMemory);
  }
}

Result<std::unique_ptr<Broker>> Broker::AttachExisting(const std::string& state_dir) {
  try {
    Result<std::unique_ptr<SegmentFile>> file = OpenSegmentFile(state_dir, OpenMode::kAttachExisting);
    if (!file.ok()) return std::move(file).status();
    return std::unique_ptr<Broker>(new Broker(std::move(file).value()));
  } catch (...) {
    return Status::Error(kNoMemory);
  }
}

Status Broker::UseOwnDescriptor() {
  struct stat st {};
  const bool ours = file_->fd.valid() && fstat(file_->fd.get(), &st) == 0 && st.st_dev == file_->device &&
                    st.st_ino == file_->inode;
  if (ours && file_->owner_pid == getpid()) return Status::Ok();
  // Closed by the application (which dropped the liveness lock with it): the number may name
  // another file now, so it is not ours to close, and the registration is lost.
  if (!ours) (void)file_->fd.release();
  ForgetAfterFork();
  return ReopenSegmentDescriptor(file_.get());
}

Status Broker::Register(const std::string& tenant) {
  try {
    if (Status s = UseOwnDescriptor(); !s.ok()) return s;
    Segment* segment = file_->segment;
    if (tenant.empty() || tenant.size() >= static_cast<size_t>(kTenantNameBytes) ||
        tenant.find('\0') != std::string::npos) {
      return Status::InvalidArgument(
          fmt::format("gpuslice: tenant name '{}' is invalid: it must be 1 to 63 bytes, without NUL", tenant));
    }
    if (slot_ >= 0 && !StillRegistered()) slot_ = -1;  // lost: register afresh
    if (slot_ >= 0) {
      if (TenantName(*segment, tenant_) == tenant) return Status::Ok();
      return Status::InvalidArgument(
          fmt::format("gpuslice: this process is registered as tenant '{}' and cannot also register as '{}'",
                      TenantName(*segment, tenant_), tenant));
    }
    if (!file_->writable) {
      return Status::PermissionDenied(
          fmt::format("gpuslice: state file {} is mapped read-only: this process cannot register", file_->path));
    }
    const int fd = file_->fd.get();
    TableLock table(segment, TableLock::Failure::kReturn);  // claims are idempotent: no repair needed
    if (!table.locked()) return table.status();
    std::optional<TenantIndex> tenant_index = FindOrClaimTenant(segment, tenant, /*recycle=*/false);
    if (!tenant_index) {
      // sabotage-point: reclaim-on-register-tenants-off
      ReapDeadLocked(segment, fd, std::nullopt);
      tenant_index = FindOrClaimTenant(segment, tenant, /*recycle=*/true);
    }
    if (!tenant_index) {
      return Status::ResourceExhausted(
          fmt::format("gpuslice: the tenant table of {} is full ({} tenants with live processes)", file_->path,
                      kMaxTenants));
    }
    const pid_t pid = getpid();
    std::optional<ProcessSlot> slot = ClaimProcessSlot(segment, fd, *tenant_index, pid);
    if (!slot) {
      // sabotage-point: reclaim-on-register-processes-off
      ReapDeadLocked(segment, fd, std::nullopt);
      slot = ClaimProcessSlot(segment, fd, *tenant_index, pid);
    }
    if (!slot) {
      return Status::ResourceExhausted(
          fmt::format("gpuslice: the process table of {} is full ({} live processes)", file_->path, kMaxProcesses));
    }
    health_->ForgetOwed();  // a forked child registering afresh owes nothing of its parent's
    slot_ = slot->value();
    tenant_ = tenant_index->value();
    generation_ = At(*segment, *slot).generation.load();
    return Status::Ok();
  } catch (...) {
    return Status::Error(kNoMemory);
  }
}

void Broker::Unregister() {
  const std::optional<ProcessSlot> own = slot();
  if (!own) return;
  if (file_->owner_pid != getpid()) {  // a forked child: the registration is the parent's
    ForgetAfterFork();
    return;
  }
  Segment* segment = file_->segment;
  TableLock table(segment, TableLock::Failure::kReport);
  // Without the table lock the slot stays registered; dropping the liveness lock lets a reaper
  // that can lock the table return its charges.
  if (table.locked() && StillRegistered()) {  // else it was reaped: it may be another's now
    // A ledger lock held past its bound keeps that charge and the slot: once this process is
    // gone (its liveness lock dropped below), a later reap returns them.
    ReturnChargesAndFree(segment, *own, kReapLedgerWaitNs);
  }
  // Only this descriptor's own lock can be released through it: always safe.
  UnlockByte(file_->fd.get(), kLivenessLockBase + static_cast<uint64_t>(own->value()));
  slot_ = -1;
  tenant_ = -1;
}

Result<LedgerId> Broker::OpenLedger(const uint8_t (&uuid)[16], uint64_t device_total_bytes, MemoryShare share) {
  try {
    if (slot() && file_->owner_pid != getpid()) ForgetAfterFork();
    const std::optional<ProcessSlot> own = slot();
    const std::optional<TenantIndex> tenant = this->tenant();
    if (!own || !tenant)
      return Status::Error("gpuslice: this process must register with the broker before opening a ledger");
    if (share.request > share.limit) {
      return Status::InvalidArgument(fmt::format("gpuslice: a memory request of {} above its limit of {}",
                                                 Bytes(share.request), Bytes(share.limit)));
    }
    Segment* segment = file_->segment;
    const int fd = file_->fd.get();
    TableLock table(segment, TableLock::Failure::kReturn);
    if (!table.locked()) return table.status();
    if (!StillRegistered()) {
      return Status::Error(
          fmt::format("gpuslice: this process's broker registration was lost (its descriptor of {} was closed); it "
                      "must register again",
                      file_->path));
    }
    std::optional<GpuIndex> gpu = FindOrClaimGpu(segment, uuid, device_total_bytes, /*recycle=*/false);
    if (!gpu) {
      // sabotage-point: reclaim-on-new-gpu-off
      ReapDeadLocked(segment, fd, own);
      gpu = FindOrClaimGpu(segment, uuid, device_total_bytes, /*recycle=*/true);
    }
    if (!gpu) {
      return Status::ResourceExhausted(
          fmt::format("gpuslice: the GPU table of {} is full ({} GPUs in use); cannot add {}", file_->path, kMaxGpus,
                      FormatUuid(uuid)));
    }
    const LedgerId ledger = LedgerId::Of(*tenant, *gpu);
    LedgerEntry& entry = At(*segment, ledger);
    ProcessEntry& self = At(*segment, *own);
    // Published before the ledger's mutex is taken: whoever reaps this process then visits the
    // ledger, and so repairs it should this process die holding that mutex. It also holds the
    // tenant's request for every decision from now on (broker/memory_requests.h).
    const bool already_open = MarkGpuOpen(self, *gpu);
    // Dead processes must not pin an old share (see below).
    // sabotage-point: reclaim-on-new-quota-off
    if (entry.state.load() == kInUse && ShareOf(entry) != share) ReapDeadLocked(segment, fd, own);
    Status opened = OpenLocked(ledger, share, already_open);
    if (!opened.ok()) {
      if (!already_open) MarkGpuClosed(self, *gpu);
      return opened;
    }
    return ledger;
  } catch (...) {
    return Status::Error(kNoMemory);
  }
}

Status Broker::OpenLocked(LedgerId ledger, MemoryShare share, bool already_open) {
  Segment* segment = file_->segment;
  LedgerEntry& entry = At(*segment, ledger);
  LedgerLock lock(segment, ledger, /*report=*/false, health_->WaitFor(ledger));
  if (!lock.locked()) {  // the caller reports the error (the shim: once); fail closed
    const LockFailure failure = lock.failure();
    health_->MarkFailed(ledger);
    return Status::Unavailable(
        LockFaultLine(segment,
                      fmt::format("the memory ledger lock of tenant '{}' on {}", TenantName(*segment, tenant_),
                                  GpuUuidOf(*segment, ledger.gpu())),
                      failure, "this tenant's allocations on this GPU are refused"));
  }
  SettleLocked(ledger);
  const std::optional<ProcessSlot> own = slot();
  MemoryShare current = share;
  if (entry.state.load() != kInUse) {
    SetShare(segment, ledger, share);  // the tenant's first process on this GPU sets its share
    entry.state.store(kInUse);
  } else if ((current = ShareOf(entry)) != share && !already_open && entry.used.load() == 0 &&
             !RequestHeldElsewhere(*segment, ledger, own)) {
    SetShare(segment, ledger, share);  // nobody holds the ledger any more: a new first process
    current = share;
  }
  if (current != share) {
    return Status::InvalidArgument(fmt::format(
        "gpuslice: tenant '{}' has {} on {}, set by its first process{}; this process asks for {} (every process of "
        "a tenant must have the same GPUSLICE_MEMORY_REQUEST and GPUSLICE_MEMORY_LIMIT on a GPU)",
        TenantName(*segment, tenant_), ShareText(current), GpuUuidOf(*segment, ledger.gpu()),
        entry.announced.load() != 0 ? " or announced by the node" : "", ShareText(share)));
  }
  if (share.request == 0 || already_open || RequestHeldElsewhere(*segment, ledger, own)) return Status::Ok();
  return HoldRequest(segment, ledger, health_->WaitFor(ledger), /*refuse_if_borrowed=*/true, MemoryAnnouncer::kNone,
                     nullptr);
}

bool Broker::OwnsLedger(LedgerId ledger) const {
  const std::optional<ProcessSlot> own = slot();
  return own && ledger.tenant() == tenant() &&
         IsGpuOpen(At(*file_->segment, *own), ledger.gpu(), std::memory_order_relaxed);
}

bool Broker::StillRegistered() const {
  const std::optional<ProcessSlot> own = slot();
  if (!own) return false;
  const ProcessEntry& self = At(*file_->segment, *own);
  return self.state.load(std::memory_order_relaxed) == static_cast<uint32_t>(ProcessState::kRegistered) &&
         self.generation.load(std::memory_order_relaxed) == generation_;
}

bool Broker::TryCharge(LedgerId ledger, uint64_t bytes) {
  const std::optional<ProcessSlot> own = slot();
  if (!own) return false;  // unregistered meanwhile (the process exits): charges nothing
  Segment* segment = file_->segment;
  LedgerEntry& entry = At(*segment, ledger);
  std::atomic<uint64_t>& mine = At(At(*segment, *own).charged, ledger.gpu());
  LedgerLock lock(segment, ledger, /*report=*/true, health_->WaitFor(ledger));
  if (!lock.locked()) {  // reported once by LedgerLock; fail closed on this GPU until it is free
    health_->MarkFailed(ledger);
    return false;
  }
  if (!StillRegistered()) return false;  // fail closed: the slot may be another process's now
  SettleLocked(ledger);
  const uint64_t used = entry.used.load(std::memory_order_relaxed);
  const uint64_t quota = entry.quota.load(std::memory_order_relaxed);
  const uint64_t held = mine.load(std::memory_order_relaxed);
  // The last test keeps a forged charge of this process from wrapping (unlimited quotas).
  // sabotage-point: quota-ignored
  if (bytes > quota || used > quota - bytes || held > UINT64_MAX - bytes) return false;
  // Beyond its request the tenant borrows: decided with the GPU's other tenants, one decision at
  // a time per GPU, the lock held until the charge is stored (broker/memory_requests.h).
  const uint64_t request = entry.request.load(std::memory_order_relaxed);
  std::optional<GpuMemoryLock> borrowing;
  if (used + bytes > request) {
    // No tenant of the GPU has a request (as before requests existed): nothing to check. The
    // charge is published first and the count read after (both sequentially consistent), so a
    // request being held meanwhile either is seen here or sees this charge (HoldRequest).
    entry.used.store(used + bytes);
    if (At(*segment, ledger.gpu()).request_ledgers.load() == 0) {
      mine.store(held + bytes, std::memory_order_release);
      return true;
    }
    entry.used.store(used);  // decided under the GPU's lock instead
    borrowing.emplace(segment, ledger.gpu(), health_->WaitFor(ledger));
    if (!borrowing->locked()) return false;
    const uint64_t total = At(*segment, ledger.gpu()).total_memory.load();
    if (!FitsBeside(total, OthersOnGpu(*segment, ledger.gpu(), ledger.tenant()), request, used + bytes)) return false;
  }
  // A SIGKILL may fall between these stores: the next locker recomputes `used` from the charges.
  entry.used.store(used + bytes, std::memory_order_release);
  mine.store(held + bytes, std::memory_order_release);
  return true;
}

bool Broker::Reserve(LedgerId ledger, uint64_t bytes) {
  if (!OwnsLedger(ledger)) return false;
  if (TryCharge(ledger, bytes)) return true;
  // sabotage-point: reclaim-on-allocation-off
  ReapDeadProcesses();  // what is missing may be held by processes that died
  if (OwnsLedger(ledger) && TryCharge(ledger, bytes)) return true;
  // Counted once per refused call, before the refusal is returned, by atomic adds that a SIGKILL
  // cannot tear (one killed between the two may count the refusal without its bytes). Off the
  // launch path: only allocations come here.
  LedgerEntry& entry = At(*file_->segment, ledger);
  entry.refused_allocations.fetch_add(1, std::memory_order_relaxed);
  entry.refused_bytes.fetch_add(bytes, std::memory_order_relaxed);
  return false;
}

void Broker::Release(LedgerId ledger, uint64_t bytes) {
  const std::optional<ProcessSlot> own = slot();
  if (!own || !OwnsLedger(ledger) || bytes == 0) return;
  Segment* segment = file_->segment;
  LedgerEntry& entry = At(*segment, ledger);
  std::atomic<uint64_t>& mine = At(At(*segment, *own).charged, ledger.gpu());
  LedgerLock lock(segment, ledger, /*report=*/true, health_->WaitFor(ledger));
  if (!lock.locked()) {
    // The charge stays (refusing more, never less) and is credited once the lock is taken again.
    health_->MarkFailed(ledger);
    health_->Owe(ledger.gpu(), bytes);
    return;
  }
  if (!StillRegistered()) return;  // the reaper returned this process's charges already
  SettleLocked(ledger);
  const uint64_t held = mine.load(std::memory_order_relaxed);
  const uint64_t returned = std::min(bytes, held);  // never more than this process reserved
  const uint64_t used = entry.used.load(std::memory_order_relaxed);
  entry.used.store(used - std::min(returned, used), std::memory_order_release);
  mine.store(held - returned, std::memory_order_release);
}

void Broker::SettleLocked(LedgerId ledger) {
  if (health_->MarkTaken(ledger)) ReportLedgerLockRecovered(file_->segment, ledger);
  const std::optional<ProcessSlot> own = slot();
  if (!own) return;  // unregistered: nothing of this process's is charged
  const uint64_t owed = health_->TakeOwed(ledger.gpu());
  if (owed == 0) return;
  LedgerEntry& entry = At(*file_->segment, ledger);
  std::atomic<uint64_t>& mine = At(At(*file_->segment, *own).charged, ledger.gpu());
  const uint64_t held = mine.load(std::memory_order_relaxed);
  const uint64_t returned = std::min(owed, held);  // never more than this process reserved
  const uint64_t used = entry.used.load(std::memory_order_relaxed);
  entry.used.store(used - std::min(returned, used), std::memory_order_release);
  mine.store(held - returned, std::memory_order_release);
}

Segment* Broker::segment() const { return file_->segment; }

bool Broker::IsProcessAlive(ProcessSlot slot) const {
  if (slot.value() == slot_) return true;
  return file_->fd.valid() &&
         IsByteLockedByOther(file_->fd.get(), kLivenessLockBase + static_cast<uint64_t>(slot.value()));
}

std::optional<LedgerId> Broker::FindLedger(const uint8_t (&uuid)[16]) const {
  const std::optional<TenantIndex> tenant = this->tenant();
  if (!tenant) return std::nullopt;
  const Segment& segment = *file_->segment;
  uint64_t words[2];
  std::memcpy(words, uuid, sizeof words);
  for (GpuIndex gpu : UsedGpus(segment)) {
    const GpuEntry& entry = At(segment, gpu);
    if (entry.state.load() != static_cast<uint32_t>(EntryState::kInUse) || entry.uuid[0].load() != words[0] ||
        entry.uuid[1].load() != words[1])
      continue;
    const LedgerId ledger = LedgerId::Of(*tenant, gpu);
    if (At(segment, ledger).state.load() != static_cast<uint32_t>(EntryState::kInUse)) return std::nullopt;
    return ledger;
  }
  return std::nullopt;
}

uint64_t Broker::Used(LedgerId ledger) const {
  return At(*file_->segment, ledger).used.load(std::memory_order_acquire);
}

uint64_t Broker::Quota(LedgerId ledger) const {
  return At(*file_->segment, ledger).quota.load(std::memory_order_acquire);
}

uint64_t Broker::Request(LedgerId ledger) const {
  return At(*file_->segment, ledger).request.load(std::memory_order_acquire);
}

uint64_t Broker::Available(LedgerId ledger) const {
  const Segment& segment = *file_->segment;
  const LedgerEntry& entry = At(segment, ledger);
  const uint64_t used = entry.used.load(std::memory_order_acquire);
  const uint64_t limit = entry.quota.load(std::memory_order_acquire);
  const uint64_t request = entry.request.load(std::memory_order_acquire);
  const uint64_t room = limit > used ? limit - used : 0;
  if (At(segment, ledger.gpu()).request_ledgers.load() == 0) return room;  // no request on the GPU
  const OtherTenants others = OthersOnGpu(segment, ledger.gpu(), ledger.tenant());
  if (others.held_requests == 0 && request == 0) return room;  // no request on the GPU: no rule
  const uint64_t total = At(segment, ledger.gpu()).total_memory.load();
  const uint64_t guaranteed = request > used ? request - used : 0;
  const uint64_t unreserved = total > others.committed ? total - others.committed : 0;
  return std::min(room, std::max(guaranteed, unreserved > used ? unreserved - used : 0));
}

uint64_t Broker::GpuUsed(LedgerId ledger) const {
  uint64_t sum = 0;
  for (TenantIndex tenant : UsedTenants(*file_->segment))
    sum += At(*file_->segment, LedgerId::Of(tenant, ledger.gpu())).used.load(std::memory_order_acquire);
  return sum;
}

int Broker::GpuProcesses(LedgerId ledger) const {
  int count = 0;
  for (ProcessSlot slot : UsedProcessSlots(*file_->segment)) {
    const ProcessEntry& process = At(*file_->segment, slot);
    const bool registered = process.state.load() == static_cast<uint32_t>(ProcessState::kRegistered);
    if (registered && IsGpuOpen(process, ledger.gpu()) && IsProcessAlive(slot)) ++count;
  }
  return count;
}

void Broker::ReapDeadProcesses() {
  if (!file_->writable) return;
  try {
    if (!UseOwnDescriptor().ok()) return;
  } catch (...) {
    return;
  }
  Segment* segment = file_->segment;
  TableLock table(segment, TableLock::Failure::kReport);
  if (table.locked()) ReapDeadLocked(segment, file_->fd.get(), slot());
}

void Broker::ForgetAfterFork() {
  // Only close(2): this may run in a pthread_atfork child handler. Closing the child's copy does
  // not release the parent's lock (the open file description lives on in the parent), and the
  // child no longer keeps the parent's slot alive once the parent dies.
  if (file_) file_->fd.reset();
  slot_ = -1;
  tenant_ = -1;
}

const std::string& Broker::path() const { return file_->path; }

}  // namespace gpuslice::broker
