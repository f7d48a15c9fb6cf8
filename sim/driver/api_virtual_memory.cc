// Virtual memory management (cuMemCreate / cuMemAddressReserve / cuMemMap / cuMemSetAccess).
//
// The model follows the real driver:
//  - cuMemCreate makes physical memory: a memfd of the requested size (a multiple of the 2 MiB
//    granularity), so that it can be mapped at several addresses and every mapping sees the same
//    bytes. Memory located on a device (CU_MEM_LOCATION_TYPE_DEVICE) is charged to that device
//    at creation; host-located memory is not device memory and charges nothing.
//  - The physical memory (and its device charge) goes when the last handle reference
//    (cuMemCreate, cuMemRetainAllocationHandle; dropped by cuMemRelease) AND the last mapping
//    (cuMemUnmap) are gone, in either order.
//  - cuMemAddressReserve reserves address space (PROT_NONE anonymous memory); cuMemMap maps the
//    memfd over part of a reservation, inaccessible (PROT_NONE) until cuMemSetAccess grants
//    access, and registers the range with the driver (kind kVirtualMapping, charged 0: the
//    charge belongs to the physical memory) so that copies into it validate. cuMemUnmap turns
//    the range back into reserved address space.
#include "driver_api.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <map>
#include <memory>
#include <mutex>

#include "driver_state.h"

namespace gpuslice::sim {
namespace {

constexpr uint64_t kGranularity = 2ULL << 20;  // minimum and recommended, as on current GPUs

// Physical memory made by cuMemCreate; freed with the last shared_ptr (handle or mapping).
struct PhysicalMemory {
  Driver* driver = nullptr;
  int device = -1;  // device it is charged to, -1 for host-located memory
  uint64_t size = 0;
  uint64_t charged = 0;
  int fd = -1;
  CUmemAllocationProp prop{};

  ~PhysicalMemory() {
    if (fd >= 0) close(fd);
    // After fork the child's driver is another one; the parent's charge is not ours to return.
    if (charged && Driver::Get() == driver) driver->CreditDevice(device, charged);
  }
};

struct HandleEntry {
  std::shared_ptr<PhysicalMemory> memory;
  uint64_t references = 0;  // cuMemCreate / cuMemRetainAllocationHandle minus cuMemRelease
};

struct Mapping {
  size_t size = 0;
  size_t offset = 0;
  CUmemGenericAllocationHandle handle = 0;  // the value the mapping was made with
  std::shared_ptr<PhysicalMemory> memory;
  unsigned long long access[kMaxDevices] = {};  // CUmemAccess_flags per device
};

struct VmmState {
  Driver* driver = nullptr;
  CUmemGenericAllocationHandle next_handle = 0x1000;
  std::map<CUmemGenericAllocationHandle, HandleEntry> handles;
  std::map<CUdeviceptr, size_t> reservations;  // base -> size
  std::map<CUdeviceptr, Mapping> mappings;     // base -> mapping
};

std::mutex g_mutex;
VmmState g_state;

VmmState& StateFor(Driver* d) {
  if (g_state.driver != d) {
    // A fork child re-ran cuInit: the parent's handles are not this process's.
    for (auto& [handle, entry] : g_state.handles) entry.memory->charged = 0;
    for (auto& [base, mapping] : g_state.mappings) mapping.memory->charged = 0;
    g_state = VmmState{};
    g_state.driver = d;
  }
  return g_state;
}

bool Aligned(uint64_t value, uint64_t alignment) { return value % alignment == 0; }

// Validates an allocation's properties; *device is the device it is charged to, or -1.
CUresult CheckProp(Driver* d, const CUmemAllocationProp* prop, int* device) {
  if (!prop) return CUDA_ERROR_INVALID_VALUE;
  if (prop->type != CU_MEM_ALLOCATION_TYPE_PINNED) return CUDA_ERROR_INVALID_VALUE;
  switch (prop->location.type) {
    case CU_MEM_LOCATION_TYPE_DEVICE:
      if (prop->location.id < 0 || prop->location.id >= d->device_count()) return CUDA_ERROR_INVALID_DEVICE;
      *device = prop->location.id;
      return CUDA_SUCCESS;
    case CU_MEM_LOCATION_TYPE_HOST:
    case CU_MEM_LOCATION_TYPE_HOST_NUMA:
      *device = -1;  // host memory: no device capacity
      return CUDA_SUCCESS;
    default:  // HOST_NUMA_CURRENT is documented as invalid for cuMemCreate
      return CUDA_ERROR_INVALID_VALUE;
  }
}

// The mapping that contains [ptr, ptr+size), or end().
std::map<CUdeviceptr, Mapping>::iterator FindMapping(VmmState& s, CUdeviceptr ptr, size_t size) {
  auto it = s.mappings.upper_bound(ptr);
  if (it == s.mappings.begin()) return s.mappings.end();
  --it;
  if (ptr - it->first >= it->second.size || size > it->second.size - (ptr - it->first)) return s.mappings.end();
  return it;
}

// The reservation that contains [ptr, ptr+size), or end().
std::map<CUdeviceptr, size_t>::iterator FindReservation(VmmState& s, CUdeviceptr ptr, size_t size) {
  auto it = s.reservations.upper_bound(ptr);
  if (it == s.reservations.begin()) return s.reservations.end();
  --it;
  if (ptr - it->first >= it->second || size > it->second - (ptr - it->first)) return s.reservations.end();
  return it;
}

// The mappings that exactly tile [ptr, ptr+size) (whole mappings, no gaps). False otherwise.
bool WholeMappings(VmmState& s, CUdeviceptr ptr, size_t size, std::vector<CUdeviceptr>* bases) {
  CUdeviceptr at = ptr;
  const CUdeviceptr end = ptr + size;
  while (at < end) {
    auto it = s.mappings.find(at);
    if (it == s.mappings.end() || it->second.size > end - at) return false;
    bases->push_back(at);
    at += it->second.size;
  }
  return !bases->empty();
}

// Replaces a mapping by reserved, inaccessible address space and drops its memory reference.
void UnmapLocked(Driver* d, VmmState& s, CUdeviceptr base) {
  auto it = s.mappings.find(base);
  d->RemoveRange(base, nullptr);
  mmap(reinterpret_cast<void*>(base), it->second.size, PROT_NONE,
       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
  s.mappings.erase(it);  // the last reference frees the physical memory
}

int Protection(const Mapping& m) {
  unsigned long long best = CU_MEM_ACCESS_FLAGS_PROT_NONE;
  for (unsigned long long a : m.access) best |= a;
  if (best & 0x2) return PROT_READ | PROT_WRITE;
  if (best & 0x1) return PROT_READ;
  return PROT_NONE;
}

}  // namespace
}  // namespace gpuslice::sim

using namespace gpuslice::sim;

CUresult CUDAAPI cuMemGetAllocationGranularity(size_t* granularity, const CUmemAllocationProp* prop,
                                               CUmemAllocationGranularity_flags option) try {
  GPUSLICE_SIM_ENTRY();
  Driver* d = nullptr;
  if (CUresult rc = RequireInit(&d); rc != CUDA_SUCCESS) return rc;
  if (!granularity) return CUDA_ERROR_INVALID_VALUE;
  if (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM && option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED)
    return CUDA_ERROR_INVALID_VALUE;
  int device = -1;
  if (CUresult rc = CheckProp(d, prop, &device); rc != CUDA_SUCCESS) return rc;
  *granularity = kGranularity;
  return CUDA_SUCCESS;
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size, const CUmemAllocationProp* prop,
                             unsigned long long flags) try {
  GPUSLICE_SIM_ENTRY();
  Driver* d = nullptr;
  if (CUresult rc = RequireInit(&d); rc != CUDA_SUCCESS) return rc;
  if (!handle || size == 0 || !Aligned(size, kGranularity) || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  int device = -1;
  if (CUresult rc = CheckProp(d, prop, &device); rc != CUDA_SUCCESS) return rc;

  auto memory = std::make_shared<PhysicalMemory>();
  memory->driver = d;
  memory->device = device;
  memory->size = size;
  memory->prop = *prop;
  if (device >= 0) {
    if (d->ChargeDevice(device, ChargedBytes(size)) != CUDA_SUCCESS) return CUDA_ERROR_OUT_OF_MEMORY;
    memory->charged = ChargedBytes(size);
  }
  memory->fd = memfd_create("gpuslice-sim-vmm", MFD_CLOEXEC);
  if (memory->fd < 0 || ftruncate(memory->fd, static_cast<off_t>(size)) != 0) return CUDA_ERROR_OUT_OF_MEMORY;

  std::lock_guard<std::mutex> lock(g_mutex);
  VmmState& s = StateFor(d);
  const CUmemGenericAllocationHandle id = s.next_handle++;
  s.handles[id] = HandleEntry{std::move(memory), 1};
  *handle = id;
  return CUDA_SUCCESS;
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuMemRelease(CUmemGenericAllocationHandle handle) try {
  GPUSLICE_SIM_ENTRY();
  Driver* d = nullptr;
  if (CUresult rc = RequireInit(&d); rc != CUDA_SUCCESS) return rc;
  std::lock_guard<std::mutex> lock(g_mutex);
  VmmState& s = StateFor(d);
  auto it = s.handles.find(handle);
  if (it == s.handles.end()) return CUDA_ERROR_INVALID_VALUE;
  // The memory itself stays while a mapping holds it.
  if (--it->second.references == 0) s.handles.erase(it);
  return CUDA_SUCCESS;
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuMemRetainAllocationHandle(CUmemGenericAllocationHandle* handle, void* addr) try {
  GPUSLICE_SIM_ENTRY();
  Driver* d = nullptr;
  if (CUresult rc = RequireInit(&d); rc != CUDA_SUCCESS) return rc;
  if (!handle) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(g_mutex);
  VmmState& s = StateFor(d);
  auto it = FindMapping(s, reinterpret_cast<CUdeviceptr>(addr), 1);
  if (it == s.mappings.end()) return CUDA_ERROR_INVALID_VALUE;
  // The same handle value the memory was mapped with, even after its last cuMemRelease.
  HandleEntry& entry = s.handles[it->second.handle];
  if (entry.references == 0) entry.memory = it->second.memory;
  ++entry.references;
  *handle = it->second.handle;
  return CUDA_SUCCESS;
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp* prop,
                                                        CUmemGenericAllocationHandle handle) try {
  GPUSLICE_SIM_ENTRY();
  Driver* d = nullptr;
  if (CUresult rc = RequireInit(&d); rc != CUDA_SUCCESS) return rc;
  if (!prop) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(g_mutex);
  VmmState& s = StateFor(d);
  auto it = s.handles.find(handle);
  if (it == s.handles.end()) return CUDA_ERROR_INVALID_VALUE;
  *prop = it->second.memory->prop;
  return CUDA_SUCCESS;
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuMemAddressReserve(CUdeviceptr* ptr, size_t size, size_t alignment, CUdeviceptr addr,
                                     unsigned long long flags) try {
  GPUSLICE_SIM_ENTRY();
  Driver* d = nullptr;
  if (CUresult rc = RequireInit(&d); rc != CUDA_SUCCESS) return rc;
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  if (!ptr || size == 0 || !Aligned(size, page) || !Aligned(addr, page) || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (alignment & (alignment - 1)) return CUDA_ERROR_INVALID_VALUE;  // a power of two, or 0
  alignment = std::max<size_t>(alignment, kGranularity);
  if (size > SIZE_MAX - alignment) return CUDA_ERROR_OUT_OF_MEMORY;

  constexpr int kFlags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
  void* base = MAP_FAILED;
  if (addr && Aligned(addr, alignment)) {
    // The address is a hint: used when free, otherwise the driver picks one.
    base = mmap(reinterpret_cast<void*>(addr), size, PROT_NONE, kFlags | MAP_FIXED_NOREPLACE, -1, 0);
    if (base != MAP_FAILED && reinterpret_cast<CUdeviceptr>(base) != addr) {
      munmap(base, size);  // kernels before 4.17 ignore MAP_FIXED_NOREPLACE
      base = MAP_FAILED;
    }
  }
  if (base == MAP_FAILED) {
    // Over-reserve, then trim to the requested alignment.
    void* raw = mmap(nullptr, size + alignment, PROT_NONE, kFlags, -1, 0);
    if (raw == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
    const auto start = reinterpret_cast<uintptr_t>(raw);
    const uintptr_t aligned = (start + alignment - 1) & ~(uintptr_t{alignment} - 1);
    if (aligned > start) munmap(raw, aligned - start);
    const uintptr_t tail = start + size + alignment - (aligned + size);
    if (tail) munmap(reinterpret_cast<void*>(aligned + size), tail);
    base = reinterpret_cast<void*>(aligned);
  }
  std::lock_guard<std::mutex> lock(g_mutex);
  StateFor(d).reservations[reinterpret_cast<CUdeviceptr>(base)] = size;
  *ptr = reinterpret_cast<CUdeviceptr>(base);
  return CUDA_SUCCESS;
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuMemAddressFree(CUdeviceptr ptr, size_t size) try {
  GPUSLICE_SIM_ENTRY();
  Driver* d = nullptr;
  if (CUresult rc = RequireInit(&d); rc != CUDA_SUCCESS) return rc;
  std::lock_guard<std::mutex> lock(g_mutex);
  VmmState& s = StateFor(d);
  auto it = s.reservations.find(ptr);
  if (it == s.reservations.end() || it->second != size) return CUDA_ERROR_INVALID_VALUE;
  // Mappings still inside the range are unmapped with it (their memory follows the usual
  // last-mapping-and-last-handle rule).
  for (auto m = s.mappings.lower_bound(ptr); m != s.mappings.end() && m->first < ptr + size;)
    UnmapLocked(d, s, (m++)->first);
  munmap(reinterpret_cast<void*>(ptr), size);
  s.reservations.erase(it);
  return CUDA_SUCCESS;
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                          unsigned long long flags) try {
  GPUSLICE_SIM_ENTRY();
  Driver* d = nullptr;
  if (CUresult rc = RequireInit(&d); rc != CUDA_SUCCESS) return rc;
  if (!ptr || size == 0 || flags != 0 || !Aligned(ptr, kGranularity) || !Aligned(size, kGranularity) ||
      !Aligned(offset, kGranularity))
    return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(g_mutex);
  VmmState& s = StateFor(d);
  auto h = s.handles.find(handle);
  if (h == s.handles.end()) return CUDA_ERROR_INVALID_VALUE;
  const std::shared_ptr<PhysicalMemory>& memory = h->second.memory;
  if (offset > memory->size || size > memory->size - offset) return CUDA_ERROR_INVALID_VALUE;
  // The range must lie in one reservation and not overlap an existing mapping.
  if (FindReservation(s, ptr, size) == s.reservations.end()) return CUDA_ERROR_INVALID_VALUE;
  auto next = s.mappings.lower_bound(ptr);
  if (next != s.mappings.end() && next->first < ptr + size) return CUDA_ERROR_INVALID_VALUE;
  if (next != s.mappings.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second.size > ptr) return CUDA_ERROR_INVALID_VALUE;
  }
  // Shared, so that every mapping of the memory sees the same bytes; inaccessible until
  // cuMemSetAccess, as on the real driver.
  void* at = mmap(reinterpret_cast<void*>(ptr), size, PROT_NONE, MAP_SHARED | MAP_FIXED, memory->fd,
                  static_cast<off_t>(offset));
  if (at == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;

  Mapping m;
  m.size = size;
  m.offset = offset;
  m.handle = handle;
  m.memory = memory;
  Allocation a;
  a.base = ptr;
  a.size = size;
  a.charged = 0;
  a.device = std::max(memory->device, 0);
  a.kind = AllocationKind::kVirtualMapping;
  d->AddRange(a);
  s.mappings[ptr] = std::move(m);
  return CUDA_SUCCESS;
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuMemUnmap(CUdeviceptr ptr, size_t size) try {
  GPUSLICE_SIM_ENTRY();
  Driver* d = nullptr;
  if (CUresult rc = RequireInit(&d); rc != CUDA_SUCCESS) return rc;
  if (!ptr || size == 0) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(g_mutex);
  VmmState& s = StateFor(d);
  // Whole mappings only: a sub-range of a mapping cannot be unmapped.
  std::vector<CUdeviceptr> bases;
  if (!WholeMappings(s, ptr, size, &bases)) return CUDA_ERROR_INVALID_VALUE;
  for (CUdeviceptr base : bases) UnmapLocked(d, s, base);
  return CUDA_SUCCESS;
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc* desc, size_t count) try {
  GPUSLICE_SIM_ENTRY();
  Driver* d = nullptr;
  if (CUresult rc = RequireInit(&d); rc != CUDA_SUCCESS) return rc;
  if (!ptr || size == 0 || !desc || count == 0) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < count; ++i) {
    if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE) return CUDA_ERROR_INVALID_VALUE;
    if (desc[i].location.id < 0 || desc[i].location.id >= d->device_count()) return CUDA_ERROR_INVALID_DEVICE;
    if (desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_NONE && desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READ &&
        desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
      return CUDA_ERROR_INVALID_VALUE;
  }
  std::lock_guard<std::mutex> lock(g_mutex);
  VmmState& s = StateFor(d);
  // The range must be fully mapped, by whole mappings.
  std::vector<CUdeviceptr> bases;
  if (!WholeMappings(s, ptr, size, &bases)) return CUDA_ERROR_INVALID_VALUE;
  for (CUdeviceptr base : bases) {
    Mapping& m = s.mappings[base];
    for (size_t i = 0; i < count; ++i) m.access[desc[i].location.id] = desc[i].flags;
    // One address space stands for every device: the most permissive access wins.
    if (mprotect(reinterpret_cast<void*>(base), m.size, Protection(m)) != 0) return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuMemGetAccess(unsigned long long* flags, const CUmemLocation* location, CUdeviceptr ptr) try {
  GPUSLICE_SIM_ENTRY();
  Driver* d = nullptr;
  if (CUresult rc = RequireInit(&d); rc != CUDA_SUCCESS) return rc;
  if (!flags || !location || location->type != CU_MEM_LOCATION_TYPE_DEVICE) return CUDA_ERROR_INVALID_VALUE;
  if (location->id < 0 || location->id >= d->device_count()) return CUDA_ERROR_INVALID_DEVICE;
  std::lock_guard<std::mutex> lock(g_mutex);
  VmmState& s = StateFor(d);
  auto it = FindMapping(s, ptr, 1);
  if (it == s.mappings.end()) return CUDA_ERROR_INVALID_VALUE;
  *flags = it->second.access[location->id];
  return CUDA_SUCCESS;
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}
