// Typed indices into the segment's tables, made only through a bounds check.
//
// Every byte of the shared segment can be written by any process that maps it (a bug, a stray
// write, a forged value: docs/broker.md, "What the segment trusts"). A raw number read from it —
// a process entry's tenant, a GPU's holder, a high-water mark — must therefore never index an
// array before it is checked. These types make that hard to forget: a TenantIndex, GpuIndex,
// ProcessSlot or LedgerId exists only once its value is known to lie inside its table, and the
// entries are reached through At(segment, index), which takes nothing else.
//
//   if (auto tenant = TenantIndex::From(process.tenant.load())) At(*segment, *tenant) ...
//   for (ProcessSlot p : UsedProcessSlots(*segment)) ...   // the high-water mark, clamped
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>

#include "broker/segment_layout.h"

namespace gpuslice::broker {

// An index in [0, N) of the table named by Tag.
template <typename Tag, int N>
class CheckedIndex {
 public:
  static constexpr int kCount = N;

  // The index for a raw value, or nullopt when it lies outside the table.
  static constexpr std::optional<CheckedIndex> From(int64_t raw) {
    if (raw < 0 || raw >= N) return std::nullopt;
    return CheckedIndex(static_cast<int>(raw));
  }
  // The same for an unsigned raw value (a high-water mark, a u32 field).
  static constexpr std::optional<CheckedIndex> FromUnsigned(uint64_t raw) {
    if (raw >= static_cast<uint64_t>(N)) return std::nullopt;
    return CheckedIndex(static_cast<int>(raw));
  }

  constexpr int value() const { return value_; }
  friend constexpr bool operator==(CheckedIndex a, CheckedIndex b) { return a.value_ == b.value_; }
  friend constexpr bool operator!=(CheckedIndex a, CheckedIndex b) { return a.value_ != b.value_; }

 private:
  template <typename Index>
  friend class IndexRange;
  constexpr explicit CheckedIndex(int value) : value_(value) {}
  int value_;
};

using GpuIndex = CheckedIndex<struct GpuTableTag, kMaxGpus>;
using TenantIndex = CheckedIndex<struct TenantTableTag, kMaxTenants>;
using ProcessSlot = CheckedIndex<struct ProcessTableTag, kMaxProcesses>;

// A tenant's ledger on one GPU (ledgers[tenant * kMaxGpus + gpu]). Made from its two checked
// halves (always valid) or from a raw ledger number (checked).
class LedgerId {
 public:
  static constexpr LedgerId Of(TenantIndex tenant, GpuIndex gpu) {
    return LedgerId(tenant.value() * kMaxGpus + gpu.value());
  }
  static constexpr std::optional<LedgerId> From(int64_t raw) {
    if (raw < 0 || raw >= kMaxLedgers) return std::nullopt;
    return LedgerId(static_cast<int>(raw));
  }
  constexpr int value() const { return value_; }
  constexpr TenantIndex tenant() const { return *TenantIndex::From(value_ / kMaxGpus); }
  constexpr GpuIndex gpu() const { return *GpuIndex::From(value_ % kMaxGpus); }
  friend constexpr bool operator==(LedgerId a, LedgerId b) { return a.value_ == b.value_; }

 private:
  constexpr explicit LedgerId(int value) : value_(value) {}
  int value_;
};
static_assert(static_cast<int64_t>(kMaxTenants) * kMaxGpus == kMaxLedgers);

// The indices [0, min(limit, N)): iterate with a range-for. A limit read from the segment (a
// high-water mark) is clamped to the table's size here, so a forged one cannot walk past it.
template <typename Index>
class IndexRange {
 public:
  constexpr explicit IndexRange(uint64_t limit)
      : end_(limit < static_cast<uint64_t>(Index::kCount) ? static_cast<int>(limit) : Index::kCount) {}

  class Iterator {
   public:
    constexpr explicit Iterator(int at) : at_(at) {}
    constexpr Index operator*() const { return Index(at_); }
    constexpr Iterator& operator++() {
      ++at_;
      return *this;
    }
    constexpr bool operator!=(const Iterator& other) const { return at_ != other.at_; }

   private:
    int at_;
  };
  constexpr Iterator begin() const { return Iterator(0); }
  constexpr Iterator end() const { return Iterator(end_); }
  constexpr int size() const { return end_; }

 private:
  int end_;
};

// Every index of a table.
template <typename Index>
constexpr IndexRange<Index> AllIndices() {
  return IndexRange<Index>(Index::kCount);
}

// The entries below each high-water mark (entries at or past it were never used).
inline IndexRange<GpuIndex> UsedGpus(const Segment& segment) {
  return IndexRange<GpuIndex>(segment.header.gpu_high_water.load());
}
inline IndexRange<TenantIndex> UsedTenants(const Segment& segment) {
  return IndexRange<TenantIndex>(segment.header.tenant_high_water.load());
}
inline IndexRange<ProcessSlot> UsedProcessSlots(const Segment& segment) {
  return IndexRange<ProcessSlot>(segment.header.process_high_water.load());
}

// The entries, reachable only through checked indices.
inline GpuEntry& At(Segment& segment, GpuIndex gpu) { return segment.gpus[gpu.value()]; }
inline const GpuEntry& At(const Segment& segment, GpuIndex gpu) { return segment.gpus[gpu.value()]; }
inline TenantEntry& At(Segment& segment, TenantIndex tenant) { return segment.tenants[tenant.value()]; }
inline const TenantEntry& At(const Segment& segment, TenantIndex tenant) { return segment.tenants[tenant.value()]; }
inline ProcessEntry& At(Segment& segment, ProcessSlot slot) { return segment.processes[slot.value()]; }
inline const ProcessEntry& At(const Segment& segment, ProcessSlot slot) { return segment.processes[slot.value()]; }
inline LedgerEntry& At(Segment& segment, LedgerId ledger) { return segment.ledgers[ledger.value()]; }
inline const LedgerEntry& At(const Segment& segment, LedgerId ledger) { return segment.ledgers[ledger.value()]; }
// A process's per-GPU arrays (charged, busy).
template <typename T>
T& At(T (&per_gpu)[kMaxGpus], GpuIndex gpu) {
  return per_gpu[gpu.value()];
}

// A process's open_gpus mask, a bit per GPU in words of 64 (segment_layout.h).
inline std::atomic<uint64_t>& OpenGpusWord(ProcessEntry& process, GpuIndex gpu) {
  return process.open_gpus[gpu.value() / 64];
}
inline uint64_t OpenGpusBit(GpuIndex gpu) { return uint64_t{1} << (gpu.value() % 64); }
inline bool IsGpuOpen(const ProcessEntry& process, GpuIndex gpu, std::memory_order order = std::memory_order_seq_cst) {
  // sabotage-point: open-gpus-first-word-only
  return process.open_gpus[gpu.value() / 64].load(order) & OpenGpusBit(gpu);
}
// Set before the ledger's mutex is taken (so a reaper visits it); returns whether it was set already.
inline bool MarkGpuOpen(ProcessEntry& process, GpuIndex gpu) {
  return OpenGpusWord(process, gpu).fetch_or(OpenGpusBit(gpu)) & OpenGpusBit(gpu);
}
inline void MarkGpuClosed(ProcessEntry& process, GpuIndex gpu) {
  OpenGpusWord(process, gpu).fetch_and(~OpenGpusBit(gpu));
}
inline void ClearOpenGpus(ProcessEntry& process) {
  for (auto& word : process.open_gpus) word.store(0);
}

// Fields of an entry that name another entry, checked.
//
// The tenant a process entry says it belongs to; nullopt when the stored value is out of range.
inline std::optional<TenantIndex> TenantOf(const ProcessEntry& process) {
  return TenantIndex::From(process.tenant.load());
}
// The tenant holding a GPU's grant (`holder` stores tenant index + 1, 0 = nobody); nullopt for
// nobody and for a value past the tenant table.
inline std::optional<TenantIndex> HolderOf(const GpuEntry& gpu) {
  const uint32_t holder = gpu.holder.load();
  if (holder == 0) return std::nullopt;
  return TenantIndex::FromUnsigned(holder - 1u);
}
// A tenant's name, its stored length clamped to the name buffer (the last byte is a NUL).
inline uint32_t NameLength(const TenantEntry& tenant) {
  return tenant.name_length < static_cast<uint32_t>(kTenantNameBytes) ? tenant.name_length
                                                                      : static_cast<uint32_t>(kTenantNameBytes - 1);
}

}  // namespace gpuslice::broker
