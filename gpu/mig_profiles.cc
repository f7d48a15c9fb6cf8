#include "gpu/mig_profiles.h"

#include <algorithm>
#include <cstdio>

namespace gpuslice::gpu {
namespace {

// NVML_GPU_INSTANCE_PROFILE_* values (nvml.h).
constexpr int kNvml1Slice = 0x0, kNvml2Slice = 0x1, kNvml3Slice = 0x2, kNvml4Slice = 0x3, kNvml7Slice = 0x4,
              kNvml1SliceRev1 = 0x7, kNvml1SliceRev2 = 0x9;
// Valid starts (nvidia-smi mig -lgipp) as bit masks over memory slices 0-7.
constexpr uint8_t kAt0to6 = 0x7F, kAtEven = 0x55, kAt024 = 0x15, kAt04 = 0x11, kAt0 = 0x01;

// One model's seven profiles: the 1g, its media-extension twin, the 1g with two memory slices,
// 2g, 3g, 4g and 7g. `mem` are the profile names' memory figures; SMs per instance differ
// between Ampere (14 per GPC-sized slice, 98 in a 7g) and Hopper.
std::vector<MigProfile> SevenProfiles(const char* const names[7], const int sms[7]) {
  return {
      {names[0], kNvml1Slice, 19, 1, 1, sms[0], 7, kAt0to6},
      {names[1], kNvml1SliceRev1, 20, 1, 1, sms[1], 1, kAt0to6},
      {names[2], kNvml1SliceRev2, 15, 1, 2, sms[2], 4, kAtEven},
      {names[3], kNvml2Slice, 14, 2, 2, sms[3], 3, kAt024},
      {names[4], kNvml3Slice, 9, 3, 4, sms[4], 2, kAt04},
      {names[5], kNvml4Slice, 5, 4, 4, sms[5], 1, kAt0},
      {names[6], kNvml7Slice, 0, 7, 8, sms[6], 1, kAt0},
  };
}

std::vector<MigGpuModel> BuildModels() {
  static const char* const a100_40[7] = {"1g.5gb", "1g.5gb+me", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"};
  static const char* const a100_80[7] = {"1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb",
                                         "3g.40gb", "4g.40gb",    "7g.80gb"};
  static const char* const h200[7] = {"1g.18gb", "1g.18gb+me", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"};
  static const int ampere_sms[7] = {14, 14, 14, 28, 42, 56, 98};
  static const int hopper_sms[7] = {16, 16, 26, 32, 60, 64, 132};
  constexpr uint64_t kMi = 1ULL << 20;
  return {
      {"A100-40GB", "NVIDIA A100-SXM4-40GB", 40960 * kMi, 108, SevenProfiles(a100_40, ampere_sms)},
      {"A100-80GB", "NVIDIA A100-SXM4-80GB", 81920 * kMi, 108, SevenProfiles(a100_80, ampere_sms)},
      {"H100-80GB", "NVIDIA H100 80GB HBM3", 81559 * kMi, 132, SevenProfiles(a100_80, hopper_sms)},
      {"H200", "NVIDIA H200", 143771 * kMi, 132, SevenProfiles(h200, hopper_sms)},
  };
}

// Places instances [i, n) on the free memory slices `used` (bit mask); depth-first, lowest start
// first, so the result is deterministic.
bool PlaceFrom(std::vector<MigPlacement>* placed, const std::vector<int>& pinned, size_t i, uint32_t used) {
  if (i == placed->size()) return true;
  MigPlacement& p = (*placed)[i];
  for (int start = 0; start < kMigMemorySlices; ++start) {
    if (!(p.profile->starts & (1u << start))) continue;
    if (pinned[i] >= 0 && pinned[i] != start) continue;
    const uint32_t span = ((1u << p.profile->memory_slices) - 1) << start;
    if (start + p.profile->memory_slices > kMigMemorySlices || (used & span)) continue;
    p.start = start;
    if (PlaceFrom(placed, pinned, i + 1, used | span)) return true;
  }
  return false;
}

}  // namespace

const std::vector<MigGpuModel>& MigGpuModels() {
  static const std::vector<MigGpuModel> models = BuildModels();
  return models;
}

const MigGpuModel* FindMigGpuModel(std::string_view key) {
  for (const auto& m : MigGpuModels())
    if (key == m.key) return &m;
  return nullptr;
}

const MigProfile* FindMigProfile(const MigGpuModel& model, std::string_view name) {
  for (const auto& p : model.profiles)
    if (name == p.name) return &p;
  return nullptr;
}

std::string DescribeMigProfiles(const MigGpuModel& model) {
  std::string text;
  for (const auto& p : model.profiles) {
    char line[64];
    std::snprintf(line, sizeof line, "%s%s (up to %d)", text.empty() ? "" : ", ", p.name, p.max_count);
    text += line;
  }
  return text;
}

Result<std::vector<MigPlacement>> ValidateMigLayout(const MigGpuModel& model, std::string_view layout) {
  std::vector<MigPlacement> placed;
  std::vector<int> pinned;
  const std::string valid = std::string("profiles of ") + model.key + ": " + DescribeMigProfiles(model);
  size_t pos = 0;
  while (pos <= layout.size()) {
    const size_t comma = std::min(layout.find(',', pos), layout.size());
    std::string_view item = layout.substr(pos, comma - pos);
    pos = comma + 1;
    int start = -1;
    if (const size_t at = item.find('@'); at != item.npos) {
      const std::string_view digits = item.substr(at + 1);
      if (digits.size() != 1 || digits[0] < '0' || digits[0] > '7') {
        return Status::InvalidArgument("'" + std::string(item) +
                                       "': a start is one memory slice, 0 to 7 (e.g. 1g.18gb@6)");
      }
      start = digits[0] - '0';
      item = item.substr(0, at);
    }
    const MigProfile* profile = FindMigProfile(model, item);
    if (!profile) {
      return Status::InvalidArgument("'" + std::string(item) + "' is not a MIG profile of " + model.key + "; " + valid);
    }
    if (start >= 0 && !(profile->starts & (1u << start))) {
      std::string starts;
      for (int s = 0; s < kMigMemorySlices; ++s)
        if (profile->starts & (1u << s)) starts += (starts.empty() ? "" : ",") + std::to_string(s);
      return Status::InvalidArgument(std::string(profile->name) + " cannot start at memory slice " +
                                     std::to_string(start) + "; its valid starts are " + starts);
    }
    placed.push_back({profile, -1});
    pinned.push_back(start);
    if (comma == layout.size()) break;
  }
  if (placed.empty()) {
    return Status::InvalidArgument("no instances; " + valid);
  }
  int me_count = 0;
  for (const auto& p : model.profiles) {
    const auto n = std::count_if(placed.begin(), placed.end(), [&](const MigPlacement& x) { return x.profile == &p; });
    if (n > p.max_count) {
      return Status::InvalidArgument(std::to_string(n) + " x " + p.name + ": at most " + std::to_string(p.max_count) +
                                     " fit on one GPU");
    }
    if (std::string_view(p.name).find("+me") != std::string_view::npos) me_count += static_cast<int>(n);
  }
  int compute = 0, memory = 0;
  for (const auto& p : placed) {
    compute += p.profile->compute_slices;
    memory += p.profile->memory_slices;
  }
  if (compute > kMigComputeSlices || memory > kMigMemorySlices) {
    return Status::InvalidArgument("the instances need " + std::to_string(compute) + " compute and " +
                                   std::to_string(memory) + " memory slices; a GPU has 7 and 8");
  }
  if (!PlaceFrom(&placed, pinned, 0, 0)) {
    return Status::InvalidArgument(
        "no placement fits these instances side by side (e.g. a 4g and a 3g can share a GPU, a 4g and two 2g cannot)");
  }
  return placed;
}

}  // namespace gpuslice::gpu
