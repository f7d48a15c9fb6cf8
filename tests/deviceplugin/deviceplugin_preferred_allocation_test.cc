// GetPreferredAllocation's choice (deviceplugin/preferred_allocation.cc) as the placement library
// makes it: cases where place's best fit and NVLink islands choose other GPUs than the first
// free ones would, and requests no single device can take. The kubelet's side of the same call
// is in deviceplugin_kubelet_test.cc.
#include <gtest/gtest.h>

#include <set>

#include "deviceplugin/preferred_allocation.h"

namespace gpuslice::deviceplugin {
namespace {

constexpr uint64_t kGi = 1ULL << 30;

// Whole GPUs with these NVML indices, `memory` each.
DeviceCatalog Catalog(const std::vector<int>& indices, uint64_t memory = 16 * kGi) {
  std::vector<gpu::GpuInfo> gpus;
  for (int index : indices)
    gpus.push_back(gpu::GpuInfo{index, "GPU-test-" + std::to_string(index), "sim", memory, -1, "", ""});
  return DeviceCatalog(gpus, 100);
}

// The first `n` slices on catalog position `p`.
std::vector<std::string> Free(const DeviceCatalog& catalog, size_t p, int n) {
  const auto& ids = catalog.SliceIds(p);
  return std::vector<std::string>(ids.begin(), ids.begin() + n);
}

// Slices chosen per catalog position.
std::map<int, int> PerGpu(const DeviceCatalog& catalog, const std::vector<std::string>& chosen) {
  std::map<int, int> per_gpu;
  for (const std::string& id : chosen) ++per_gpu[static_cast<int>(catalog.PositionOfSlice(id).value())];
  return per_gpu;
}

struct Offer {
  std::vector<std::string> ids;
  void Add(const DeviceCatalog& catalog, size_t p, int n) {
    const auto more = Free(catalog, p, n);
    ids.insert(ids.end(), more.begin(), more.end());
  }
};

std::map<int, int> Prefer(const DeviceCatalog& catalog, const Offer& offer, int size, int island) {
  const Result<std::vector<std::string>> preferred = PreferSlices(catalog, offer.ids, {}, size, island);
  EXPECT_TRUE(preferred.ok()) << preferred.message();
  const std::vector<std::string> chosen = preferred.value_or(std::vector<std::string>{});
  EXPECT_EQ(static_cast<int>(chosen.size()), size);
  EXPECT_EQ(std::set<std::string>(chosen.begin(), chosen.end()).size(), chosen.size());
  return PerGpu(catalog, chosen);
}

// Two whole GPUs (200 compute units) on a node of two NVLink islands of 4: island 0 has one free
// GPU (3), island 1 two (4, 5). Place's island choice keeps the pair on island 1; without
// islands (the control, and what a spread over the fullest GPUs takes) the pair is GPUs 3 and 4,
// across the islands.
TEST(PreferredAllocation, TwoWholeGpusShareAnNvlinkIsland) {
  const DeviceCatalog catalog = Catalog({0, 1, 2, 3, 4, 5, 6, 7});
  Offer offer;
  for (size_t p : {0, 1, 2}) offer.Add(catalog, p, 30);
  for (size_t p : {3, 4, 5}) offer.Add(catalog, p, 100);
  for (size_t p : {6, 7}) offer.Add(catalog, p, 50);
  const auto islands = Prefer(catalog, offer, 200, 4);
  EXPECT_EQ(islands, (std::map<int, int>{{4, 100}, {5, 100}}));
  const auto control = Prefer(catalog, offer, 200, 0);
  EXPECT_EQ(control, (std::map<int, int>{{3, 100}, {4, 100}})) << "no islands: the first free GPUs";
}

// Islands are NVML index ranges, not catalog positions: a plugin serving GPUs 2..7 (devices:)
// has island 0 = GPUs 2, 3 and island 1 = GPUs 4..7. GPUs 2 and 4 are in use: island 0 has one
// free GPU (3), island 1 three (5, 6, 7), so two whole GPUs are 5 and 6 (positions 3, 4). Islands
// of positions (GPUs 2..5 and 6, 7) or none would give GPUs 3 and 5 (positions 1, 3).
TEST(PreferredAllocation, IslandsFollowNvmlIndicesWhenSomeGpusAreNotServed) {
  const DeviceCatalog catalog = Catalog({2, 3, 4, 5, 6, 7});
  Offer offer;
  for (size_t p = 0; p < 6; ++p) offer.Add(catalog, p, p == 0 || p == 2 ? 30 : 100);
  EXPECT_EQ(Prefer(catalog, offer, 200, 4), (std::map<int, int>{{3, 100}, {4, 100}}));
  EXPECT_EQ(Prefer(catalog, offer, 200, 0), (std::map<int, int>{{1, 100}, {3, 100}})) << "the control: no islands";
}

// 1.3 GPUs is neither one device's slice nor whole devices: no preference, and the reason. The
// old plugin took a whole GPU and 30 of another, and the pod's time and memory were split.
TEST(PreferredAllocation, MoreThanOneDeviceButNotWholeDevicesIsRefused) {
  const DeviceCatalog catalog = Catalog({0, 1, 2});
  Offer offer;
  offer.Add(catalog, 0, 100);
  offer.Add(catalog, 1, 60);
  offer.Add(catalog, 2, 30);
  const Result<std::vector<std::string>> split = PreferSlices(catalog, offer.ids, {}, 130, 0);
  ASSERT_FALSE(split.ok());
  EXPECT_EQ(split.status().code(), Status::Code::kResourceExhausted);
  EXPECT_NE(split.message().find(
                "130 slices fit on no single device here: more than one device's 100 slices and not whole devices"),
            std::string::npos)
      << split.message();
  Offer partly;  // 50, 60 and 30 free: 140 on the node, at most 60 on one GPU
  partly.Add(catalog, 0, 50);
  partly.Add(catalog, 1, 60);
  partly.Add(catalog, 2, 30);
  const Result<std::vector<std::string>> too_many = PreferSlices(catalog, partly.ids, {}, 61, 0);
  EXPECT_EQ(too_many.status().code(), Status::Code::kResourceExhausted);
  EXPECT_NE(too_many.message().find("the most free on one device is 60 (GPU 1 GPU-test-1)"), std::string::npos)
      << too_many.message();
  Offer one_whole;  // 100, 99 and 99 free: one whole GPU only
  one_whole.Add(catalog, 0, 100);
  one_whole.Add(catalog, 1, 99);
  one_whole.Add(catalog, 2, 99);
  const Result<std::vector<std::string>> two_whole = PreferSlices(catalog, one_whole.ids, {}, 200, 0);
  EXPECT_EQ(two_whole.status().code(), Status::Code::kResourceExhausted);
  EXPECT_NE(two_whole.message().find("there are not 2 wholly free devices"), std::string::npos) << two_whole.message();
}

// More positions than place's 8 GPUs per node (MIG instances): the tightest fit over all of them.
TEST(PreferredAllocation, BestFitOverMoreThanEightInstances) {
  std::vector<gpu::GpuInfo> instances;
  for (int i = 0; i < 10; ++i)
    instances.push_back(
        gpu::GpuInfo{i / 7, "MIG-test-" + std::to_string(i), "sim", 10 * kGi, i % 7, "GPU-test", "sim"});
  const DeviceCatalog catalog(instances, 10);
  Offer offer;
  for (size_t p = 0; p < 10; ++p) offer.Add(catalog, p, p == 2 ? 5 : p == 9 ? 3 : 10);
  EXPECT_EQ(Prefer(catalog, offer, 3, 0), (std::map<int, int>{{9, 3}}));
  EXPECT_EQ(Prefer(catalog, offer, 4, 0), (std::map<int, int>{{2, 4}}));
}

}  // namespace
}  // namespace gpuslice::deviceplugin
