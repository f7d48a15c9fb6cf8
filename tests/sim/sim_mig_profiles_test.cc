// The simulator's MIG profile tables (gpu/mig_profiles.cc) against NVIDIA's published ones:
// every profile of the four models, every start slice it may and may not take, and layouts that
// nvidia-smi accepts and refuses.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gpu/mig_profiles.h"

namespace gpuslice::gpu {
namespace {

struct ExpectedProfile {
  const char* name;
  int lgip_id;
  int compute_slices;
  int memory_slices;
  int sm_count;
  int max_count;
  std::vector<int> starts;  // nvidia-smi mig -lgipp
};

struct ExpectedModel {
  const char* key;
  int sm_count;
  std::vector<ExpectedProfile> profiles;
};

const std::vector<ExpectedModel>& Expected() {
  static const std::vector<ExpectedModel> models = {
      {"A100-40GB",
       108,
       {{"1g.5gb", 19, 1, 1, 14, 7, {0, 1, 2, 3, 4, 5, 6}},
        {"1g.5gb+me", 20, 1, 1, 14, 1, {0, 1, 2, 3, 4, 5, 6}},
        {"1g.10gb", 15, 1, 2, 14, 4, {0, 2, 4, 6}},
        {"2g.10gb", 14, 2, 2, 28, 3, {0, 2, 4}},
        {"3g.20gb", 9, 3, 4, 42, 2, {0, 4}},
        {"4g.20gb", 5, 4, 4, 56, 1, {0}},
        {"7g.40gb", 0, 7, 8, 98, 1, {0}}}},
      {"A100-80GB",
       108,
       {{"1g.10gb", 19, 1, 1, 14, 7, {0, 1, 2, 3, 4, 5, 6}},
        {"1g.10gb+me", 20, 1, 1, 14, 1, {0, 1, 2, 3, 4, 5, 6}},
        {"1g.20gb", 15, 1, 2, 14, 4, {0, 2, 4, 6}},
        {"2g.20gb", 14, 2, 2, 28, 3, {0, 2, 4}},
        {"3g.40gb", 9, 3, 4, 42, 2, {0, 4}},
        {"4g.40gb", 5, 4, 4, 56, 1, {0}},
        {"7g.80gb", 0, 7, 8, 98, 1, {0}}}},
      {"H100-80GB",
       132,
       {{"1g.10gb", 19, 1, 1, 16, 7, {0, 1, 2, 3, 4, 5, 6}},
        {"1g.10gb+me", 20, 1, 1, 16, 1, {0, 1, 2, 3, 4, 5, 6}},
        {"1g.20gb", 15, 1, 2, 26, 4, {0, 2, 4, 6}},
        {"2g.20gb", 14, 2, 2, 32, 3, {0, 2, 4}},
        {"3g.40gb", 9, 3, 4, 60, 2, {0, 4}},
        {"4g.40gb", 5, 4, 4, 64, 1, {0}},
        {"7g.80gb", 0, 7, 8, 132, 1, {0}}}},
      {"H200",
       132,
       {{"1g.18gb", 19, 1, 1, 16, 7, {0, 1, 2, 3, 4, 5, 6}},
        {"1g.18gb+me", 20, 1, 1, 16, 1, {0, 1, 2, 3, 4, 5, 6}},
        {"1g.35gb", 15, 1, 2, 26, 4, {0, 2, 4, 6}},
        {"2g.35gb", 14, 2, 2, 32, 3, {0, 2, 4}},
        {"3g.71gb", 9, 3, 4, 60, 2, {0, 4}},
        {"4g.71gb", 5, 4, 4, 64, 1, {0}},
        {"7g.141gb", 0, 7, 8, 132, 1, {0}}}},
  };
  return models;
}

TEST(MigProfilesTest, EveryModelHasExactlyThePublishedProfiles) {
  ASSERT_EQ(MigGpuModels().size(), Expected().size());
  for (const auto& want : Expected()) {
    SCOPED_TRACE(want.key);
    const MigGpuModel* model = FindMigGpuModel(want.key);
    ASSERT_NE(model, nullptr);
    EXPECT_EQ(model->sm_count, want.sm_count);
    ASSERT_EQ(model->profiles.size(), want.profiles.size());
    for (const auto& p : want.profiles) {
      SCOPED_TRACE(p.name);
      const MigProfile* got = FindMigProfile(*model, p.name);
      ASSERT_NE(got, nullptr);
      EXPECT_EQ(got->lgip_id, p.lgip_id);
      EXPECT_EQ(got->compute_slices, p.compute_slices);
      EXPECT_EQ(got->memory_slices, p.memory_slices);
      EXPECT_EQ(got->sm_count, p.sm_count);
      EXPECT_EQ(got->max_count, p.max_count);
    }
  }
}

// Every profile at every start slice 0-7, alone on the GPU: valid exactly at the published starts.
TEST(MigProfilesTest, EveryProfileIsPlaceableExactlyAtItsPublishedStarts) {
  for (const auto& want : Expected()) {
    const MigGpuModel& model = *FindMigGpuModel(want.key);
    for (const auto& p : want.profiles) {
      for (int start = 0; start < kMigMemorySlices; ++start) {
        const std::string layout = std::string(p.name) + "@" + std::to_string(start);
        const bool published = std::find(p.starts.begin(), p.starts.end(), start) != p.starts.end();
        const Result<std::vector<MigPlacement>> placed = ValidateMigLayout(model, layout);
        EXPECT_EQ(placed.ok(), published) << want.key << " " << layout << ": " << placed.message();
        if (published) {
          ASSERT_TRUE(placed.ok());
          ASSERT_EQ(placed->size(), 1u);
          EXPECT_EQ((*placed)[0].start, start);
        } else {
          EXPECT_EQ(placed.status().code(), Status::Code::kInvalidArgument);
          EXPECT_NE(placed.message().find("valid starts"), std::string::npos) << placed.message();
        }
      }
    }
  }
}

// As many of one profile as the GPU holds is valid; one more is refused.
TEST(MigProfilesTest, EveryProfileFitsItsPublishedCountAndNoMore) {
  for (const auto& want : Expected()) {
    const MigGpuModel& model = *FindMigGpuModel(want.key);
    for (const auto& p : want.profiles) {
      std::string layout;
      for (int i = 0; i < p.max_count; ++i) layout += (i ? "," : "") + std::string(p.name);
      const Result<std::vector<MigPlacement>> placed = ValidateMigLayout(model, layout);
      ASSERT_TRUE(placed.ok()) << want.key << " " << layout << ": " << placed.message();
      EXPECT_EQ(placed->size(), static_cast<size_t>(p.max_count));
      layout += "," + std::string(p.name);
      EXPECT_FALSE(ValidateMigLayout(model, layout).ok()) << want.key << " " << layout;
    }
  }
}

struct LayoutCase {
  const char* model;
  const char* layout;
  bool valid;
};

// Mixed layouts (the MIG user guide's supported configurations and neighbours that are not).
TEST(MigProfilesTest, MixedLayoutsAreAcceptedAndRefusedAsTheDriverDoes) {
  const LayoutCase cases[] = {
      {"H200", "3g.71gb,2g.35gb,1g.18gb", true},
      {"H200", "3g.71gb,3g.71gb", true},
      {"H200", "4g.71gb,3g.71gb", true},
      {"H200", "4g.71gb,2g.35gb,1g.18gb", true},
      {"H200", "4g.71gb,1g.18gb,1g.18gb,1g.18gb", true},
      {"H200", "2g.35gb,2g.35gb,2g.35gb,1g.18gb", true},
      {"H200", "2g.35gb,2g.35gb,3g.71gb", true},
      {"H200", "3g.71gb,1g.35gb,1g.35gb", true},
      {"H200", "1g.18gb+me,1g.18gb,1g.18gb,1g.18gb,1g.18gb,1g.18gb,1g.18gb", true},
      {"H200", "7g.141gb", true},
      {"H200", "7g.141gb,1g.18gb", false},         // 8 compute slices
      {"H200", "4g.71gb,4g.71gb", false},          // one 4g per GPU
      {"H200", "3g.71gb,3g.71gb,1g.18gb", false},  // 9 memory slices
      {"H200", "4g.71gb,2g.35gb,2g.35gb", false},  // 8 compute slices
      {"H200", "1g.18gb,1g.18gb,1g.18gb,1g.18gb,1g.18gb,1g.18gb,1g.18gb,1g.18gb", false},
      {"H200", "1g.18gb+me,1g.18gb+me", false},  // one +me per GPU
      {"H200", "1g.35gb,1g.35gb,1g.35gb,1g.35gb,1g.18gb", false},
      {"H200", "1g.18gb@0,4g.71gb", false},    // the 4g must start at 0
      {"H200", "3g.71gb@4,2g.35gb@4", false},  // overlap
      {"H200", "3g.71gb@4,2g.35gb@2,1g.18gb@0", true},
      {"H200", "3g.40gb", false},  // an H100 profile
      {"H200", "", false},
      {"H200", "3g.71gb,,1g.18gb", false},
      {"H200", "3g.71gb@9", false},
      {"A100-40GB", "4g.20gb,2g.10gb,1g.5gb", true},
      {"A100-40GB", "3g.20gb,2g.10gb,2g.10gb", true},
      {"A100-40GB", "2g.10gb,2g.10gb,2g.10gb,1g.5gb", true},
      {"A100-40GB", "3g.20gb,3g.20gb,1g.5gb", false},
      {"A100-80GB", "3g.40gb,4g.40gb", true},
      {"A100-80GB", "1g.20gb,1g.20gb,1g.20gb,1g.20gb", true},
      {"H100-80GB", "1g.20gb,1g.20gb,1g.20gb,1g.20gb,1g.10gb", false},
      {"H100-80GB", "3g.40gb,2g.20gb,1g.10gb", true},
  };
  for (const auto& c : cases) {
    const Result<std::vector<MigPlacement>> placed = ValidateMigLayout(*FindMigGpuModel(c.model), c.layout);
    EXPECT_EQ(placed.ok(), c.valid) << c.model << " '" << c.layout << "': " << placed.message();
    if (!c.valid) {
      EXPECT_FALSE(placed.message().empty());
    }
  }
}

TEST(MigProfilesTest, PlacementsNeverOverlap) {
  const Result<std::vector<MigPlacement>> placed =
      ValidateMigLayout(*FindMigGpuModel("H200"), "1g.18gb,3g.71gb,2g.35gb");
  ASSERT_TRUE(placed.ok()) << placed.message();
  uint32_t used = 0;
  for (const auto& p : *placed) {
    const uint32_t span = ((1u << p.profile->memory_slices) - 1) << p.start;
    EXPECT_EQ(used & span, 0u);
    used |= span;
  }
  EXPECT_STREQ((*placed)[0].profile->name, "1g.18gb");  // in the order given
}

}  // namespace
}  // namespace gpuslice::gpu
