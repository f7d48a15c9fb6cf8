// The allocation map's table (shim/address_table.h) against std::unordered_map: the same random
// inserts, lookups and removals, over keys shaped like device addresses (aligned, clustered, so
// that probe runs are long and removals shift entries back) and key 0.
#include "shim/address_table.h"

#include <gtest/gtest.h>

#include <random>
#include <unordered_map>

namespace gpuslice::shim {
namespace {

TEST(ShimAddressTableTest, AgreesWithAHashMapOverRandomInsertsAndRemovals) {
  std::mt19937_64 random(2026);
  AddressTable<uint64_t> table;
  std::unordered_map<uint64_t, uint64_t> expected;
  // 2 MiB-aligned addresses from a small range (many collide on their home slot), and 0.
  const auto key = [&] { return random() % 8 == 0 ? 0 : (random() % 3000) << 21; };
  for (int step = 0; step < 200'000; ++step) {
    const uint64_t k = key();
    switch (random() % 3) {
      case 0: {
        const auto [value, inserted] = table.TryInsert(k, static_cast<uint64_t>(step));
        const auto [it, expected_inserted] = expected.try_emplace(k, step);
        ASSERT_EQ(inserted, expected_inserted) << "step " << step;
        ASSERT_EQ(*value, it->second) << "step " << step;
        break;
      }
      case 1: {
        const std::optional<uint64_t> taken = table.Take(k);
        const auto it = expected.find(k);
        ASSERT_EQ(taken.has_value(), it != expected.end()) << "step " << step;
        if (taken) {
          ASSERT_EQ(*taken, it->second) << "step " << step;
          expected.erase(it);
        }
        break;
      }
      default: {
        const uint64_t* found = table.Find(k);
        const auto it = expected.find(k);
        ASSERT_EQ(found != nullptr, it != expected.end()) << "step " << step;
        if (found) ASSERT_EQ(*found, it->second) << "step " << step;
      }
    }
    ASSERT_EQ(table.size(), expected.size()) << "step " << step;
  }
  // Every entry left is found, and TakeIf removes exactly those it is told to.
  for (const auto& [k, v] : expected) ASSERT_NE(table.Find(k), nullptr) << k;
  table.TakeIf([](uint64_t k, uint64_t) { return (k >> 21) % 2 == 0; });
  for (const auto& [k, v] : expected) EXPECT_EQ(table.Find(k) != nullptr, (k >> 21) % 2 == 1) << k;
}

}  // namespace
}  // namespace gpuslice::shim
