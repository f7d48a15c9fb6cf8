// GetPreferredAllocation's choice (deviceplugin/preferred_allocation.cc) as the placement library
// makes it: cases where place's best fit and NVLink islands choose other GPUs than a spread over
// the fullest GPUs would. The kubelet's side of the same call is in deviceplugin_kubelet_test.cc.
#include <gtest/gtest.h>

#include <set>

#include "deviceplugin/preferred_allocation.h"

namespace gpuslice::deviceplugin {
namespace {

constexpr uint64_t kGi = 1ULL << 30;

// Whole GPUs with these NVML indices, `memory` each.
DeviceCatalog Catalog(const std::vector<int>& indices, uint64_t memory = 16 * kGi) {
  std::vector<GpuInfo> gpus;
  for (int index : indices) gpus.push_back(GpuInfo{index, "GPU-test-" + std::to_string(index), "sim", memory, -1, ""});
  return DeviceCatalog(gpus, kGi);
}

// The first `n` units of `kind` on catalog position `p`.
std::vector<std::string> Free(const DeviceCatalog& catalog, UnitKind kind, size_t p, int n) {
  const auto& ids = catalog.UnitIds(p, kind);
  return std::vector<std::string>(ids.begin(), ids.begin() + n);
}

// Units chosen per catalog position.
std::map<int, int> PerGpu(const DeviceCatalog& catalog, UnitKind kind, const std::vector<std::string>& chosen) {
  std::map<int, int> per_gpu;
  for (const std::string& id : chosen) ++per_gpu[catalog.PositionOfUnit(id, kind)];
  return per_gpu;
}

struct Offer {
  std::vector<std::string> ids;
  void Add(const DeviceCatalog& catalog, UnitKind kind, size_t p, int n) {
    const auto more = Free(catalog, kind, p, n);
    ids.insert(ids.end(), more.begin(), more.end());
  }
};

std::map<int, int> Prefer(const DeviceCatalog& catalog, UnitKind kind, const Offer& offer, int size, int island) {
  std::vector<std::string> chosen;
  std::string error;
  EXPECT_TRUE(PreferUnits(catalog, kind, offer.ids, {}, size, island, &chosen, &error)) << error;
  EXPECT_EQ(static_cast<int>(chosen.size()), size);
  EXPECT_EQ(std::set<std::string>(chosen.begin(), chosen.end()).size(), chosen.size());
  return PerGpu(catalog, kind, chosen);
}

// Two whole GPUs (200 compute units) on a node of two NVLink islands of 4: island 0 has one free
// GPU (3), island 1 two (4, 5). Place's island choice keeps the pair on island 1; without
// islands (the control, and what a spread over the fullest GPUs takes) the pair is GPUs 3 and 4,
// across the islands.
TEST(PreferredAllocation, TwoWholeGpusShareAnNvlinkIsland) {
  const DeviceCatalog catalog = Catalog({0, 1, 2, 3, 4, 5, 6, 7});
  Offer offer;
  for (size_t p : {0, 1, 2}) offer.Add(catalog, UnitKind::kCompute, p, 30);
  for (size_t p : {3, 4, 5}) offer.Add(catalog, UnitKind::kCompute, p, 100);
  for (size_t p : {6, 7}) offer.Add(catalog, UnitKind::kCompute, p, 50);
  const auto islands = Prefer(catalog, UnitKind::kCompute, offer, 200, 4);
  EXPECT_EQ(islands, (std::map<int, int>{{4, 100}, {5, 100}}));
  const auto control = Prefer(catalog, UnitKind::kCompute, offer, 200, 0);
  EXPECT_EQ(control, (std::map<int, int>{{3, 100}, {4, 100}})) << "no islands: the first free GPUs";
}

// Islands are NVML index ranges, not catalog positions: a plugin serving GPUs 2..7 (devices:)
// has island 0 = GPUs 2, 3 and island 1 = GPUs 4..7. GPUs 2 and 4 are in use: island 0 has one
// free GPU (3), island 1 three (5, 6, 7), so two whole GPUs are 5 and 6 (positions 3, 4). Islands
// of positions (GPUs 2..5 and 6, 7) or none would give GPUs 3 and 5 (positions 1, 3).
TEST(PreferredAllocation, IslandsFollowNvmlIndicesWhenSomeGpusAreNotServed) {
  const DeviceCatalog catalog = Catalog({2, 3, 4, 5, 6, 7});
  Offer offer;
  for (size_t p = 0; p < 6; ++p) offer.Add(catalog, UnitKind::kCompute, p, p == 0 || p == 2 ? 30 : 100);
  EXPECT_EQ(Prefer(catalog, UnitKind::kCompute, offer, 200, 4), (std::map<int, int>{{3, 100}, {4, 100}}));
  EXPECT_EQ(Prefer(catalog, UnitKind::kCompute, offer, 200, 0), (std::map<int, int>{{1, 100}, {3, 100}}))
      << "the control: no islands";
}

// 1.3 GPUs: one whole free GPU and the rest on the GPU that fits it most tightly (GPU 2, 30
// free), keeping GPU 1's 60 for a later request. A spread over the fullest GPUs would take the
// 30 from GPU 1.
TEST(PreferredAllocation, RestOfWholeGpusGoesToTheTightestGpu) {
  const DeviceCatalog catalog = Catalog({0, 1, 2});
  Offer offer;
  offer.Add(catalog, UnitKind::kCompute, 0, 100);
  offer.Add(catalog, UnitKind::kCompute, 1, 60);
  offer.Add(catalog, UnitKind::kCompute, 2, 30);
  EXPECT_EQ(Prefer(catalog, UnitKind::kCompute, offer, 130, 0), (std::map<int, int>{{0, 100}, {2, 30}}));
}

// 80 memory units per GPU: a unit is 12.5 milli-GPU, rounded down alike for GPUs and requests,
// so the GPU with exactly the one unit asked still fits it best.
TEST(PreferredAllocation, RoundingToMilliGpuKeepsAnExactFit) {
  const DeviceCatalog catalog = Catalog({0, 1}, 80 * kGi);
  Offer offer;
  offer.Add(catalog, UnitKind::kMemory, 0, 80);
  offer.Add(catalog, UnitKind::kMemory, 1, 1);
  EXPECT_EQ(Prefer(catalog, UnitKind::kMemory, offer, 1, 0), (std::map<int, int>{{1, 1}}));
}

// More positions than place's 8 GPUs per node (MIG instances): the tightest fit over all of them.
TEST(PreferredAllocation, BestFitOverMoreThanEightInstances) {
  std::vector<GpuInfo> instances;
  for (int i = 0; i < 10; ++i)
    instances.push_back(GpuInfo{i / 7, "MIG-test-" + std::to_string(i), "sim", 10 * kGi, i % 7, "GPU-test"});
  const DeviceCatalog catalog(instances, kGi);
  Offer offer;
  for (size_t p = 0; p < 10; ++p) offer.Add(catalog, UnitKind::kMemory, p, p == 2 ? 5 : p == 9 ? 3 : 10);
  EXPECT_EQ(Prefer(catalog, UnitKind::kMemory, offer, 3, 0), (std::map<int, int>{{9, 3}}));
  EXPECT_EQ(Prefer(catalog, UnitKind::kMemory, offer, 4, 0), (std::map<int, int>{{2, 4}}));
}

}  // namespace
}  // namespace gpuslice::deviceplugin
