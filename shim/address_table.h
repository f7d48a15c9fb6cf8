// An open-addressing hash table from 64-bit keys (device addresses, handles) to small values: one
// array, linear probing, deletion by shifting the rest of a probe run back (no tombstones). An
// insert or a removal touches one or two cache lines and allocates only when the table grows.
// The node-based std::unordered_map it replaces allocated and freed a node per allocation and
// chased a pointer per lookup: a third of what the shim added to a cuMemAlloc/cuMemFree pair.
//
// Not thread-safe: AllocationMap guards each table with its shard's mutex.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace gpuslice::shim {

template <typename Value>
class AddressTable {
 public:
  // The value under `key`, if any.
  Value* Find(uint64_t key) {
    if (key == 0) return zero_ ? &*zero_ : nullptr;
    if (slots_.empty()) return nullptr;
    for (size_t i = Home(key);; i = Next(i)) {
      if (slots_[i].key == key) return &slots_[i].value;
      if (slots_[i].key == 0) return nullptr;
    }
  }
  // Inserts `value` under `key` unless one is there; returns the value under `key` and whether
  // it is the new one.
  std::pair<Value*, bool> TryInsert(uint64_t key, const Value& value) {
    if (key == 0) {
      if (zero_) return {&*zero_, false};
      zero_ = value;
      return {&*zero_, true};
    }
    if ((count_ + 1) * 2 > slots_.size()) {
      try {
        Grow();
      } catch (...) {  // no memory to grow: fuller, but correct, while one slot stays empty
        if (count_ + 2 > slots_.size()) throw;
      }
    }
    size_t i = Home(key);
    for (; slots_[i].key != 0; i = Next(i)) {
      if (slots_[i].key == key) return {&slots_[i].value, false};
    }
    slots_[i] = Slot{key, value};
    ++count_;
    return {&slots_[i].value, true};
  }
  // Removes `key`; returns its value, or nothing when it was not there.
  std::optional<Value> Take(uint64_t key) {
    if (key == 0) {
      std::optional<Value> taken = zero_;
      zero_.reset();
      return taken;
    }
    if (slots_.empty()) return std::nullopt;
    size_t i = Home(key);
    for (; slots_[i].key != key; i = Next(i)) {
      if (slots_[i].key == 0) return std::nullopt;
    }
    std::optional<Value> taken = slots_[i].value;
    RemoveAt(i);
    return taken;
  }
  // Calls `visit(key, value)` on every entry; removes those for which it returns true.
  template <typename Visit>
  void TakeIf(Visit visit) {
    if (zero_ && visit(uint64_t{0}, *zero_)) zero_.reset();
    std::vector<uint64_t> taken;
    for (const Slot& slot : slots_) {
      if (slot.key != 0 && visit(slot.key, slot.value)) taken.push_back(slot.key);
    }
    for (uint64_t key : taken) Take(key);
  }
  size_t size() const { return count_ + (zero_ ? 1 : 0); }

 private:
  struct Slot {
    uint64_t key = 0;  // 0: empty (key 0 itself is kept in zero_)
    Value value{};
  };

  // A 64-bit finaliser (MurmurHash3's): addresses aligned to 512 bytes or 2 MiB spread over
  // every slot.
  size_t Home(uint64_t key) const {
    key ^= key >> 33;
    key *= 0xff51afd7ed558ccdULL;
    key ^= key >> 33;
    key *= 0xc4ceb9fe1a85ec53ULL;
    key ^= key >> 33;
    return static_cast<size_t>(key) & (slots_.size() - 1);
  }
  size_t Next(size_t i) const { return (i + 1) & (slots_.size() - 1); }

  // Empties slot `i` and moves later entries of its probe run back into the hole, so that every
  // entry stays reachable from its home slot without tombstones.
  void RemoveAt(size_t i) {
    --count_;
    for (size_t j = Next(i);; j = Next(j)) {
      if (slots_[j].key == 0) break;
      const size_t home = Home(slots_[j].key);
      // The entry at j may fill the hole at i when its home is not within (i, j] cyclically.
      const bool stays = i <= j ? (i < home && home <= j) : (i < home || home <= j);
      if (stays) continue;
      slots_[i] = slots_[j];
      i = j;
    }
    slots_[i] = Slot{};
  }
  // Allocates before it changes anything: a failure leaves the table as it was.
  void Grow() {
    std::vector<Slot> old(slots_.empty() ? 64 : slots_.size() * 2, Slot{});
    old.swap(slots_);
    count_ = 0;
    for (const Slot& slot : old) {
      if (slot.key != 0) TryInsert(slot.key, slot.value);
    }
  }

  std::vector<Slot> slots_;
  size_t count_ = 0;
  std::optional<Value> zero_;
};

}  // namespace gpuslice::shim
