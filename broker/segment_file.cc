#include "broker/segment_file.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <exception>
#include <new>
#include <utility>

#include <boost/interprocess/exceptions.hpp>
#include <boost/interprocess/file_mapping.hpp>
#include <fmt/format.h>

#include "broker/access_advice.h"
#include "broker/lock_fault.h"
#include "broker/state_dir.h"
#include "common/clock.h"
#include "common/process_lock.h"

namespace gpuslice::broker {
namespace {

namespace bip = boost::interprocess;

// How long a newcomer waits for the process creating the state file (milliseconds of work).
constexpr uint64_t kCreatorBoundNs = 2'000'000'000;
uint64_t CreatorBoundNs() { return std::min(kCreatorBoundNs, LockTimeoutNs()); }

constexpr uint64_t kSegmentSize = sizeof(Segment);
constexpr mode_t kFileMode = 0660;

std::string Strerror(int error) { return std::strerror(error); }

std::string Hex(uint64_t value) { return fmt::format("{:#018x}", value); }

std::string Octal(mode_t mode) { return fmt::format("0{:03o}", static_cast<unsigned>(mode & 07777)); }

// Refusals name the file, what is wrong and what would be valid; "stop and remove" is the remedy
// for anything another build or a corruption left behind.
std::string Refuse(const std::string& path, const std::string& why) {
  return fmt::format("gpuslice: refusing state file {}: {}", path, why);
}

const std::string kRemedy = "; once no gpuslice process uses it (fuser -v shows who has it open), remove it";

// True while some registered process holds its liveness lock on the file: the segment is live.
bool AnyProcessAlive(int fd) {
  return IsRangeLockedByOther(fd, kLivenessLockBase, static_cast<uint64_t>(kMaxProcesses));
}

// Opens the file (creating it when allowed). O_NOFOLLOW: the state file itself is never a link.
// O_NONBLOCK: a FIFO put in its place opens at once (and is refused as not a regular file) rather
// than blocking the reader for ever; on a regular file it changes nothing.
Result<int> OpenStateFile(const std::string& path, OpenMode mode, bool* writable) {
  constexpr int kFlags = O_CLOEXEC | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK;
  *writable = true;
  if (mode == OpenMode::kCreateOrAttach) {
    UniqueFd fd(open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | kFlags, kFileMode));
    if (fd.get() >= 0) {
      // open() applied the umask; set the mode explicitly instead (the umask is never changed).
      if (fchmod(fd.get(), kFileMode) != 0) {
        return Status::Error(
            fmt::format("gpuslice: cannot set mode 0660 on new state file {}: {}", path, Strerror(errno)));
      }
      return fd.release();
    }
    if (errno != EEXIST) {
      return Status::Error(fmt::format("gpuslice: cannot create state file {}: {}", path,
                                       (errno == EACCES ? AccessAdvice(path, true) : Strerror(errno))));
    }
  }
  if (mode == OpenMode::kReadOnly) *writable = false;
  int fd = open(path.c_str(), (mode == OpenMode::kReadOnly ? O_RDONLY : O_RDWR) | kFlags);
  if (fd < 0 && (errno == EACCES || errno == EROFS) && mode == OpenMode::kAttachExisting) {
    *writable = false;  // a reader (gpuslicectl) without write permission, or on a read-only mount, still gets a view
    fd = open(path.c_str(), O_RDONLY | kFlags);
  }
  if (fd >= 0) return fd;
  if (errno == ELOOP)
    return Status::Error(Refuse(path, "it is a symbolic link; the state file must be a regular file"));
  if (errno == ENOENT) {
    return Status::NotFound(
        fmt::format("gpuslice: no state file {}: no gpuslice process has run with this state directory", path));
  }
  if (errno == EISDIR) return Status::Error(Refuse(path, "it is a directory; the state file must be a regular file"));
  if (errno == EACCES) {
    // Attaching falls back to reading (above): what was denied is the read, unless creating.
    return Status::PermissionDenied(fmt::format("gpuslice: cannot open state file {}: {}", path,
                                                AccessAdvice(path, mode == OpenMode::kCreateOrAttach)));
  }
  return Status::Error(fmt::format("gpuslice: cannot open state file {}: {}", path, Strerror(errno)));
}

Status CheckFileKind(int fd, const std::string& path, struct stat* st) {
  if (fstat(fd, st) != 0) {
    return Status::Error(fmt::format("gpuslice: cannot stat state file {}: {}", path, Strerror(errno)));
  }
  if (!S_ISREG(st->st_mode)) {
    return Status::Error(Refuse(path, "it is not a regular file; the state file must be a regular file of mode 0660"));
  }
  if (st->st_mode & S_IWOTH) {
    return Status::Error(Refuse(
        path, fmt::format("it is world-writable (mode {}); the state file must be mode 0660 or stricter (chmod o-w {})",
                          Octal(st->st_mode), path)));
  }
  return Status::Ok();
}

enum class Contents { kValid, kUninitialised };

// Reads the header through the descriptor (nothing is mapped before it is validated).
Result<Contents> Inspect(int fd, const std::string& path) {
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    return Status::Error(fmt::format("gpuslice: cannot stat state file {}: {}", path, Strerror(errno)));
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size == 0) return Contents::kUninitialised;
  alignas(SegmentHeader) unsigned char buffer[sizeof(SegmentHeader)] = {};
  const ssize_t got = pread(fd, buffer, sizeof buffer, 0);
  if (got < 0) {
    return Status::Error(fmt::format("gpuslice: cannot read state file {}: {}", path, Strerror(errno)));
  }
  const auto* header = std::launder(reinterpret_cast<const SegmentHeader*>(buffer));
  // Only a creator that died before storing the magic leaves a full-size file without one.
  if (size == kSegmentSize && header->magic == 0) return Contents::kUninitialised;
  if (Status s = ValidateHeader(*header, size, path); !s.ok()) return s;
  std::atomic_thread_fence(std::memory_order_acquire);  // pairs with the creator's magic store
  return Contents::kValid;
}

void InitialiseSegment(Segment* segment) {
  SegmentHeader& header = segment->header;
  header.layout_version = kLayoutVersion;
  header.header_size = sizeof(SegmentHeader);
  header.segment_size = kSegmentSize;
  header.created_ns = MonotonicNanos();
  header.max_gpus = kMaxGpus;
  header.max_tenants = kMaxTenants;
  header.max_processes = kMaxProcesses;
  header.tenant_name_bytes = kTenantNameBytes;
  InitRobustMutex(&header.table_mutex.mutex);
  // The ledgers' mutexes are initialised as tenants and GPUs arrive (broker/tables.cc): all
  // 32,768 of them here would touch 8 MiB of the file, most of which a node never uses.
  // A zeroed pthread mutex is process-private: waiters in one process would never be woken by an
  // unlock in another (gated launches hung until a signal), and a dead holder would never be noticed.
  for (GpuEntry& gpu : segment->gpus) {
    InitRobustMutex(&gpu.sched_mutex.mutex);
    InitRobustMutex(&gpu.memory_mutex.mutex);
  }
  // The magic goes last: whoever reads it reads a fully initialised segment.
  std::atomic_ref<uint64_t>(header.magic).store(kMagic, std::memory_order_release);
}

// Maps the file Boost opens by name, after checking it is the very file validated through fd.
Status Map(SegmentFile* file, const struct stat& validated) {
  const bip::mode_t mode = file->writable ? bip::read_write : bip::read_only;
  // Boost opens its own descriptor (without O_CLOEXEC) and closes it when `mapping` goes out of
  // scope; the mapping stays valid. The liveness locks use file->fd.get(), never this one.
  bip::file_mapping mapping(file->path.c_str(), mode);
  struct stat mapped {};
  if (fstat(mapping.get_mapping_handle().handle, &mapped) != 0 || mapped.st_dev != validated.st_dev ||
      mapped.st_ino != validated.st_ino) {
    return Status::Error(Refuse(file->path, "it was replaced while being opened; retry"));
  }
  bip::mapped_region region(mapping, mode, 0, kSegmentSize);
  file->region.swap(region);
  file->segment = static_cast<Segment*>(file->region.get_address());
  RememberSegmentPath(file->segment, file->path);
  file->device = validated.st_dev;
  file->inode = validated.st_ino;
  return Status::Ok();
}

// Initialises an empty (or abandoned) file, holding the flock that serialises creators.
Status Create(SegmentFile* file) {
  const int fd = file->fd.get();
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    return Status::Error(fmt::format("gpuslice: cannot stat state file {}: {}", file->path, Strerror(errno)));
  }
  // A segment without magic whose processes still hold their liveness locks was not abandoned
  // by a creator: its magic was overwritten while tenants use it. Initialising it again would
  // reset every ledger under them (a 1 GiB tenant could then hold 2 GiB): refuse instead.
  if (AnyProcessAlive(fd)) {
    return Status::Error(Refuse(file->path,
                                "it is corrupt (its header has no valid magic) while gpuslice processes still use "
                                "it; stop them (fuser -v shows who has it open), then remove it"));
  }
  // An abandoned file may hold a dead creator's partial writes: start again from zeros. A file
  // of the right size is zeroed in place rather than truncated, so that a reader that mapped it
  // (a gpuslicectl, a process about to register) never touches a page past the end: by punching
  // out its blocks (it stays sparse), or where the file system cannot, through the mapping.
  const bool sized = static_cast<uint64_t>(st.st_size) == kSegmentSize;
  if (!sized &&
      (ftruncate(fd, 0) != 0 || ftruncate(fd, static_cast<off_t>(kSegmentSize)) != 0 || fstat(fd, &st) != 0)) {
    return Status::Error(fmt::format("gpuslice: cannot size state file {}: {}", file->path, Strerror(errno)));
  }
  if (Status s = Map(file, st); !s.ok()) return s;
  if (sized && fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, static_cast<off_t>(kSegmentSize)) != 0)
    std::memset(static_cast<void*>(file->segment), 0, kSegmentSize);
  InitialiseSegment(file->segment);
  return Status::Ok();
}

// The creator's flock, waited for at most `bound_ns` (polled: flock has no timeout of its own).
Status FlockWithin(int fd, int operation, uint64_t bound_ns, const std::string& path) {
  constexpr uint64_t kPollNs = 1'000'000;
  for (uint64_t waited = 0;; waited += kPollNs) {
    if (flock(fd, operation | LOCK_NB) == 0) return Status::Ok();
    if (errno != EWOULDBLOCK && errno != EINTR) {
      return Status::Error(fmt::format("gpuslice: cannot lock state file {}: {}", path, Strerror(errno)));
    }
    if (waited >= bound_ns) break;
    const timespec poll{0, static_cast<long>(kPollNs)};
    nanosleep(&poll, nullptr);
  }
  return Status::Unavailable(
      fmt::format("gpuslice: state file {} is being created by a process that has held its creation lock for {:g} s "
                  "(stopped or stuck halfway; fuser -v {} shows who has it open); stop that process, or remove the "
                  "file once no gpuslice process uses it",
                  path, static_cast<double>(bound_ns) / 1e9, path));
}

Result<std::unique_ptr<SegmentFile>> Open(const std::string& state_dir, OpenMode mode) {
  Result<std::string> dir = CheckStateDirectory(state_dir, mode == OpenMode::kCreateOrAttach
                                                               ? DirectoryUse::kCreateIfMissing
                                                               : DirectoryUse::kMustExist);
  if (!dir.ok()) return std::move(dir).status();
  auto file = std::make_unique<SegmentFile>();
  file->path = *dir + (dir->back() == '/' ? "" : "/") + kStateFileName;
  Result<int> fd = OpenStateFile(file->path, mode, &file->writable);
  if (!fd.ok()) return std::move(fd).status();
  file->fd.reset(*fd);
  file->owner_pid = getpid();
  struct stat st {};
  if (Status s = CheckFileKind(file->fd.get(), file->path, &st); !s.ok()) return s;

  Result<Contents> contents = Inspect(file->fd.get(), file->path);
  if (contents.ok() && *contents == Contents::kUninitialised) {
    // Wait for a creator at work (it holds the flock); the kernel drops the flock if it died.
    // Creating takes milliseconds: a creator stopped halfway (SIGSTOP, a debugger) is not waited
    // for past kCreatorBoundNs, so cuInit, gpuslicectl and a scrape fail in bounded time.
    if (Status s = FlockWithin(file->fd.get(), mode == OpenMode::kCreateOrAttach ? LOCK_EX : LOCK_SH, CreatorBoundNs(),
                               file->path);
        !s.ok())
      return s;
    contents = Inspect(file->fd.get(), file->path);
    if (contents.ok() && *contents == Contents::kUninitialised) {
      if (mode != OpenMode::kCreateOrAttach && AnyProcessAlive(file->fd.get())) {
        return Status::Error(Refuse(file->path,
                                    "it is corrupt (its header has no valid magic) while gpuslice processes "
                                    "still use it; stop them (fuser -v shows who has it open), then remove it"));
      }
      if (mode != OpenMode::kCreateOrAttach) {
        return Status::Unavailable(
            fmt::format("gpuslice: state file {} is not initialised yet (its creator died or is still creating it); "
                        "the next process that attaches through the shim initialises it",
                        file->path));
      }
      if (Status s = Create(file.get()); !s.ok()) return s;
      flock(file->fd.get(), LOCK_UN);
      return file;
    }
    flock(file->fd.get(), LOCK_UN);
  }
  if (!contents.ok()) return std::move(contents).status();
  if (Status s = CheckFileKind(file->fd.get(), file->path, &st); !s.ok()) return s;
  if (Status s = Map(file.get(), st); !s.ok()) return s;
  return file;
}

}  // namespace

SegmentFile::~SegmentFile() {
  if (segment) ForgetSegmentPath(segment);
}

Status ValidateHeader(const SegmentHeader& header, uint64_t file_size, const std::string& path) {
  if (file_size < sizeof(SegmentHeader)) {
    return Status::Error(Refuse(path, fmt::format("it is truncated ({} bytes; a layout-version-{} state file has {}){}",
                                                  file_size, kLayoutVersion, kSegmentSize, kRemedy)));
  }
  if (header.magic != kMagic) {
    return Status::Error(Refuse(path, fmt::format("it is not a gpuslice state file (magic {}, expected {}){}",
                                                  Hex(header.magic), Hex(kMagic), kRemedy)));
  }
  if (header.layout_version != kLayoutVersion) {
    return Status::Error(Refuse(path, fmt::format("it has layout version {}, this build reads version {} only{} (or "
                                                  "run a gpuslice build of the same version)",
                                                  header.layout_version, kLayoutVersion, kRemedy)));
  }
  if (header.header_size != sizeof(SegmentHeader) || header.segment_size != kSegmentSize || file_size != kSegmentSize) {
    return Status::Error(Refuse(
        path,
        fmt::format(
            "it has {} bytes (its header says {}), a layout-version-{} state file has {} (truncated or corrupt){}",
            file_size, header.segment_size, kLayoutVersion, kSegmentSize, kRemedy)));
  }
  const auto corrupt = [&](const char* field, uint64_t value, uint64_t limit) {
    return Status::Error(Refuse(path, fmt::format("it is corrupt ({} {}, valid: {}){}", field, value, limit, kRemedy)));
  };
  if (header.max_gpus != kMaxGpus) return corrupt("GPU table capacity", header.max_gpus, kMaxGpus);
  if (header.max_tenants != kMaxTenants) return corrupt("tenant table capacity", header.max_tenants, kMaxTenants);
  if (header.max_processes != kMaxProcesses) {
    return corrupt("process table capacity", header.max_processes, kMaxProcesses);
  }
  if (header.tenant_name_bytes != kTenantNameBytes) {
    return corrupt("tenant name size", header.tenant_name_bytes, kTenantNameBytes);
  }
  if (header.gpu_high_water.load() > kMaxGpus) {
    return corrupt("GPU count", header.gpu_high_water.load(), kMaxGpus);
  }
  if (header.tenant_high_water.load() > kMaxTenants) {
    return corrupt("tenant count", header.tenant_high_water.load(), kMaxTenants);
  }
  if (header.process_high_water.load() > kMaxProcesses) {
    return corrupt("process count", header.process_high_water.load(), kMaxProcesses);
  }
  return Status::Ok();
}

Result<std::unique_ptr<SegmentFile>> OpenSegmentFile(const std::string& state_dir, OpenMode mode) {
  // Boost.Interprocess reports failures by throwing; nothing may escape to the shim's C ABI.
  try {
    return Open(state_dir, mode);
  } catch (const bip::interprocess_exception& e) {
    return Status::Error(fmt::format("gpuslice: cannot map state file in {}: {}", state_dir, e.what()));
  } catch (const std::exception& e) {
    return Status::Error(fmt::format("gpuslice: cannot attach the broker state in {}: {}", state_dir, e.what()));
  } catch (...) {
    return Status::Error(fmt::format("gpuslice: cannot attach the broker state in {}", state_dir));
  }
}

Status ReopenSegmentDescriptor(SegmentFile* file) {
  UniqueFd fd(open(file->path.c_str(), (file->writable ? O_RDWR : O_RDONLY) | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
  struct stat st {};
  if (fd.get() < 0 || fstat(fd.get(), &st) != 0 || st.st_dev != file->device || st.st_ino != file->inode) {
    return Status::Error(
        fmt::format("gpuslice: state file {} was removed or replaced since it was mapped", file->path));
  }
  file->fd = std::move(fd);
  file->owner_pid = getpid();
  return Status::Ok();
}

}  // namespace gpuslice::broker
