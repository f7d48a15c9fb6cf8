#include "ctl/plan_layout.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <string_view>
#include <tuple>

#include "ctl/plan_settings.h"
#include "ctl/units.h"

namespace gpuslice::ctl {
namespace {

enum class Need { kIsolation, kConcurrency, kSoft };

Need NeedOf(const PlanTenant& t) {
  if (t.NeedsIsolation()) return Need::kIsolation;
  if (t.latency_ms && *t.latency_ms < kTimeSlicedP99FloorMs) return Need::kConcurrency;
  return Need::kSoft;
}

double SmPercent(const gpu::MigGpuModel& model, const gpu::MigProfile& p) {
  return 100.0 * p.sm_count / model.sm_count;
}
uint64_t InstanceMemory(const gpu::MigGpuModel& model, const gpu::MigProfile& p) {
  return model.memory_bytes / gpu::kMigMemorySlices * static_cast<uint64_t>(p.memory_slices);
}

// The profiles a plan uses, smallest first (the +me twin of the 1g is never needed).
std::vector<const gpu::MigProfile*> Profiles(const gpu::MigGpuModel& model) {
  std::vector<const gpu::MigProfile*> out;
  for (const auto& p : model.profiles)
    if (std::string_view(p.name).find("+me") == std::string_view::npos) out.push_back(&p);
  std::stable_sort(out.begin(), out.end(), [](auto* a, auto* b) {
    return std::pair(a->compute_slices, a->memory_slices) < std::pair(b->compute_slices, b->memory_slices);
  });
  return out;
}

bool ProfileCovers(const gpu::MigGpuModel& model, const gpu::MigProfile& p, uint64_t memory, double compute) {
  return InstanceMemory(model, p) >= memory && SmPercent(model, p) + 1e-9 >= compute;
}

// A GPU being filled.
struct Work {
  const PlanGpu* gpu;
  std::string tier;
  GpuMode mode;
  std::vector<std::pair<const gpu::MigProfile*, size_t>> own;  // instances of one tenant each
  std::vector<size_t> shared;  // soft slices / MPS clients: of the whole GPU, or one instance
  const gpu::MigProfile* shared_profile = nullptr;
};

// Whether `members` fit as soft slices into a unit of `memory` bytes and `sm_percent` of the
// GPU: every quota together, and every request (rounded up, in the unit's terms) within 100%.
bool SharedFits(const std::vector<PlanTenant>& tenants, const std::vector<size_t>& members, uint64_t memory,
                double sm_percent) {
  uint64_t used = 0;
  double requests = 0;
  for (size_t i : members) {
    used += tenants[i].memory_bytes;
    // Not RequestInUnit, which stops at 100: a tenant needing more SMs than the unit has does not fit.
    requests += std::ceil(tenants[i].compute_percent * 100.0 / sm_percent - 1e-9);
  }
  return used <= memory && requests <= 100;
}

std::string LayoutText(const std::vector<const gpu::MigProfile*>& profiles) {
  std::string text;
  for (auto* p : profiles) text += (text.empty() ? "" : ",") + std::string(p->name);
  return text;
}

// The instances of a MIG GPU with `own` and a shared instance of `shared` (if any), largest
// first, placed; nullopt when they do not fit side by side.
std::optional<std::vector<gpu::MigPlacement>> PlaceMig(const gpu::MigGpuModel& model,
                                                       std::vector<const gpu::MigProfile*> profiles) {
  if (profiles.empty()) return std::vector<gpu::MigPlacement>{};
  std::stable_sort(profiles.begin(), profiles.end(), [](auto* a, auto* b) {
    return std::pair(a->compute_slices, a->memory_slices) > std::pair(b->compute_slices, b->memory_slices);
  });
  Result<std::vector<gpu::MigPlacement>> placed = gpu::ValidateMigLayout(model, LayoutText(profiles));
  if (!placed.ok()) return std::nullopt;
  return std::move(placed).value();
}

std::vector<const gpu::MigProfile*> OwnProfiles(const Work& w) {
  std::vector<const gpu::MigProfile*> out;
  for (const auto& [p, t] : w.own) out.push_back(p);
  return out;
}

// The smallest shared instance for `members` beside `w`'s own instances (plus `extra`), or
// nullptr when none fits. Empty members need none: returns nullptr with *fits true.
const gpu::MigProfile* SharedInstanceFor(const Work& w, const std::vector<PlanTenant>& tenants,
                                         const std::vector<size_t>& members, const gpu::MigProfile* extra, bool* fits) {
  const gpu::MigGpuModel& model = *w.gpu->model;
  std::vector<const gpu::MigProfile*> base = OwnProfiles(w);
  if (extra) base.push_back(extra);
  if (members.empty()) {
    *fits = PlaceMig(model, base).has_value();
    return nullptr;
  }
  for (auto* p : Profiles(model)) {
    if (!SharedFits(tenants, members, InstanceMemory(model, *p), SmPercent(model, *p))) continue;
    auto with = base;
    with.push_back(p);
    if (PlaceMig(model, with)) {
      *fits = true;
      return p;
    }
  }
  *fits = false;
  return nullptr;
}

// Adds tenant `t` to `w` in an instance of its own, the smallest that covers it and fits.
bool TryOwnInstance(Work* w, const std::vector<PlanTenant>& tenants, size_t t) {
  if (w->mode != GpuMode::kMig) return false;
  const gpu::MigGpuModel& model = *w->gpu->model;
  for (auto* p : Profiles(model)) {
    if (!ProfileCovers(model, *p, tenants[t].memory_bytes, tenants[t].compute_percent)) continue;
    bool fits = false;
    const gpu::MigProfile* shared = SharedInstanceFor(*w, tenants, w->shared, p, &fits);
    if (!fits) continue;
    w->own.push_back({p, t});
    w->shared_profile = shared;
    return true;
  }
  return false;
}

// Adds tenant `t` to what `w`'s tenants share: the whole GPU, or the MIG GPU's shared instance.
bool TryShared(Work* w, const std::vector<PlanTenant>& tenants, size_t t) {
  auto members = w->shared;
  members.push_back(t);
  if (w->mode == GpuMode::kMig) {
    bool fits = false;
    const gpu::MigProfile* shared = SharedInstanceFor(*w, tenants, members, nullptr, &fits);
    if (!fits) return false;
    w->shared_profile = shared;
  } else if (!SharedFits(tenants, members, w->gpu->memory_bytes, 100)) {
    return false;
  }
  w->shared = std::move(members);
  return true;
}

// The first GPU of the pool not used yet, MIG-capable when `mig`; for other uses GPUs that are
// not MIG-capable come first, keeping MIG-capable ones for the tenants that need them.
const PlanGpu* NextGpu(const std::vector<PlanGpu>& pool, const std::vector<bool>& used, bool mig) {
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t i = 0; i < pool.size(); ++i) {
      if (used[i]) continue;
      const bool capable = pool[i].model != nullptr;
      if (mig && !capable) continue;
      if (!mig && pass == 0 && capable) continue;
      return &pool[i];
    }
  }
  return nullptr;
}

// First fit of every tenant, tier by tier. False when the pool runs out; *short_tier names the
// tier that found no GPU.
bool Pack(const std::vector<PlanGpu>& pool, const std::vector<PlanTenant>& tenants, std::vector<Work>* out,
          std::string* short_tier) {
  std::vector<std::string> tiers;
  for (const auto& t : tenants)
    if (std::find(tiers.begin(), tiers.end(), t.tier) == tiers.end()) tiers.push_back(t.tier);
  std::vector<bool> used(pool.size(), false);
  std::vector<Work> works;
  for (const auto& tier : tiers) {
    std::vector<size_t> order;
    for (size_t i = 0; i < tenants.size(); ++i)
      if (tenants[i].tier == tier) order.push_back(i);
    // Isolated first, then concurrent, then soft; larger first within each.
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      const auto key = [&](size_t i) {
        return std::tuple(static_cast<int>(NeedOf(tenants[i])), -static_cast<int>(tenants[i].compute_percent),
                          ~tenants[i].memory_bytes);
      };
      return key(a) < key(b);
    });
    const size_t first_of_tier = works.size();
    auto open = [&](bool mig, GpuMode mode) -> Work* {
      const PlanGpu* gpu = NextGpu(pool, used, mig);
      if (!gpu) return nullptr;
      used[static_cast<size_t>(gpu - pool.data())] = true;
      works.push_back({gpu, tier, mode, {}, {}, nullptr});
      return &works.back();
    };
    for (size_t t : order) {
      const Need need = NeedOf(tenants[t]);
      bool placed = false;
      for (size_t w = first_of_tier; w < works.size() && !placed; ++w) {
        Work& work = works[w];
        if (need == Need::kIsolation) placed = TryOwnInstance(&work, tenants, t);
        else if (need == Need::kConcurrency)
          placed = (work.mode == GpuMode::kMps && TryShared(&work, tenants, t)) || TryOwnInstance(&work, tenants, t);
        else placed = TryShared(&work, tenants, t);
      }
      if (placed) continue;
      Work* fresh = need == Need::kIsolation     ? open(true, GpuMode::kMig)
                    : need == Need::kConcurrency ? open(false, GpuMode::kMps)
                                                 : open(false, GpuMode::kTimeslice);
      if (!fresh) {
        *short_tier = tier;
        return false;
      }
      placed = need == Need::kIsolation ? TryOwnInstance(fresh, tenants, t) : TryShared(fresh, tenants, t);
      if (!placed) {  // cannot happen after the checks in MakePlan; never hand out a bad plan
        *short_tier = tier;
        return false;
      }
    }
  }
  *out = std::move(works);
  return true;
}

// One line for a request that no number of these GPUs can meet, or "".
std::string ImpossibleTenant(const std::vector<PlanGpu>& pool, const PlanTenant& t) {
  uint64_t largest = 0;
  const PlanGpu* largest_gpu = nullptr;
  for (const auto& g : pool)
    if (g.memory_bytes > largest) largest = g.memory_bytes, largest_gpu = &g;
  if (t.memory_bytes > largest)
    return "tenant '" + t.name + "' needs " + FormatBytes(t.memory_bytes) + " of GPU memory; the largest GPU here (" +
           largest_gpu->name + ") has " + FormatBytes(largest);
  if (!t.NeedsIsolation()) return "";
  const std::string why = !t.trusted ? "untrusted (trusted: false)" : "fault-intolerant (fault_tolerant: false)";
  const PlanGpu* capable = nullptr;
  for (const auto& g : pool)
    if (g.model) capable = &g;
  if (!capable)
    return "tenant '" + t.name + "' is " + why +
           " and needs a MIG instance of its own, but no GPU here is MIG-capable (" + pool.front().name +
           "; MIG models: " + PlanModelKeys() + ")";
  for (const auto& g : pool) {
    if (!g.model) continue;
    for (auto* p : Profiles(*g.model))
      if (ProfileCovers(*g.model, *p, t.memory_bytes, t.compute_percent)) return "";
  }
  const auto& model = *capable->model;
  const auto& big = *Profiles(model).back();
  return "tenant '" + t.name + "' is " + why + " and needs " + FormatBytes(t.memory_bytes) + " and " +
         std::to_string(t.compute_percent) + "% of the SMs in a MIG instance; the largest, " + big.name + ", has " +
         FormatBytes(InstanceMemory(model, big)) + " and " + std::to_string(big.sm_count) + " of " +
         std::to_string(model.sm_count) + " SMs";
}

// The plan of packed GPUs: units placed, tenants' settings, what is left unused.
Plan BuildPlan(const std::vector<PlanGpu>& pool, const std::vector<PlanTenant>& tenants,
               const std::vector<Work>& works) {
  Plan plan;
  plan.tenants.resize(tenants.size());
  for (size_t i = 0; i < tenants.size(); ++i) plan.tenants[i].tenant = tenants[i];
  for (const Work& w : works) {
    PlannedGpu g;
    g.gpu = *w.gpu;
    g.tier = w.tier;
    g.mode = w.mode;
    const size_t gi = plan.gpus.size();
    auto add_unit = [&](PlannedUnit unit, const std::vector<size_t>& members, Placement where) {
      unit.tenants = members;
      uint64_t memory = 0;
      uint32_t requests = 0;
      for (size_t t : members) {
        PlannedTenant& pt = plan.tenants[t];
        pt.placement = where;
        pt.gpu = gi;
        pt.unit = g.units.size();
        pt.compute_request_percent =
            where == Placement::kMigInstance ? 0 : RequestInUnit(tenants[t].compute_percent, unit.sm_percent);
        memory += tenants[t].memory_bytes;
        requests += where == Placement::kMigInstance ? 0 : pt.compute_request_percent;
      }
      unit.memory_unused = unit.memory_bytes - std::min(memory, unit.memory_bytes);
      unit.compute_unused_percent = unit.shared ? 100 - std::min<uint32_t>(requests, 100) : 0;
      g.units.push_back(std::move(unit));
    };
    if (w.mode == GpuMode::kMig) {
      const gpu::MigGpuModel& model = *w.gpu->model;
      auto profiles = OwnProfiles(w);
      if (w.shared_profile) profiles.push_back(w.shared_profile);
      const auto placed = PlaceMig(model, profiles);  // fitted during packing
      std::vector<bool> taken(w.own.size(), false);
      int compute = 0, memory = 0, sms = 0;
      for (const auto& p : *placed) {
        PlannedUnit unit;
        unit.profile = p.profile;
        unit.start = p.start;
        unit.memory_bytes = InstanceMemory(model, *p.profile);
        unit.sm_percent = SmPercent(model, *p.profile);
        compute += p.profile->compute_slices;
        memory += p.profile->memory_slices;
        sms += p.profile->sm_count;
        g.mig_layout += (g.mig_layout.empty() ? "" : ",") + std::string(p.profile->name) + "@" +
                        std::to_string(p.start);
        // The instance of an own tenant with this profile not yet placed, else the shared one.
        size_t own = w.own.size();
        for (size_t k = 0; k < w.own.size(); ++k)
          if (!taken[k] && w.own[k].first == p.profile) {
            own = k;
            break;
          }
        if (own < w.own.size()) {
          taken[own] = true;
          const size_t t = w.own[own].second;
          add_unit(unit, {t}, Placement::kMigInstance);
          // The SMs its tenant does not need: no other tenant can use them (stranded).
          g.units.back().compute_unused_percent = static_cast<uint32_t>(
              std::max(0.0, std::floor(100.0 - tenants[t].compute_percent * 100.0 / unit.sm_percent)));
        } else {
          unit.shared = true;
          add_unit(unit, w.shared, Placement::kSoftSlice);
        }
      }
      g.free_compute_slices = gpu::kMigComputeSlices - compute;
      g.free_memory_slices = gpu::kMigMemorySlices - memory;
      g.sms_outside_instances = model.sm_count - sms;
      g.memory_outside_instances = model.memory_bytes / gpu::kMigMemorySlices *
                                   static_cast<uint64_t>(g.free_memory_slices);
    } else {
      PlannedUnit unit;
      unit.memory_bytes = w.gpu->memory_bytes;
      unit.shared = true;
      add_unit(unit, w.shared, w.mode == GpuMode::kMps ? Placement::kMpsClient : Placement::kSoftSlice);
    }
    plan.gpus.push_back(std::move(g));
  }
  for (const auto& gpu : pool) {
    const bool used = std::any_of(works.begin(), works.end(), [&](const Work& w) { return w.gpu == &gpu; });
    if (!used) plan.unused_gpus.push_back(gpu);
  }
  FillTenantSettings(&plan);
  return plan;
}

}  // namespace

const char* GpuModeName(GpuMode mode) {
  switch (mode) {
    case GpuMode::kMig: return "mig";
    case GpuMode::kTimeslice: return "timeslice";
    case GpuMode::kMps: return "mps";
  }
  return "timeslice";
}

const char* PlacementName(Placement where) {
  switch (where) {
    case Placement::kMigInstance: return "mig-instance";
    case Placement::kSoftSlice: return "soft-slice";
    case Placement::kMpsClient: return "mps-client";
  }
  return "soft-slice";
}

Result<Plan> MakePlan(const std::vector<PlanGpu>& gpus, const std::vector<PlanTenant>& tenants) {
  if (gpus.empty()) return Status::InvalidArgument("no GPUs to plan for");
  for (const auto& t : tenants) {
    if (std::string why = ImpossibleTenant(gpus, t); !why.empty()) return Status::InvalidArgument(std::move(why));
  }
  std::vector<Work> works;
  std::string short_tier;
  if (!Pack(gpus, tenants, &works, &short_tier)) {
    // How many such GPUs the plan would need: pack again on as many copies as there are tenants.
    std::vector<PlanGpu> more = gpus;
    while (more.size() < gpus.size() + tenants.size()) more.push_back(gpus[more.size() % gpus.size()]);
    std::vector<Work> counted;
    std::string ignored;
    std::string need = "more GPUs than that";
    if (Pack(more, tenants, &counted, &ignored)) {
      std::map<std::string, int> per_tier;
      for (const auto& w : counted) per_tier[w.tier]++;
      need = std::to_string(counted.size()) + " GPUs";
      if (per_tier.size() > 1) {
        std::string list;
        for (const auto& [tier, n] : per_tier) list += (list.empty() ? "" : ", ") + tier + " " + std::to_string(n);
        need += " (tiers never share a GPU: " + list + ")";
      }
    }
    return Status::ResourceExhausted(
        "the tenants do not fit on the " + std::to_string(gpus.size()) + (gpus.size() == 1 ? " GPU" : " GPUs") +
        " given (" + gpus.front().name + "): they need " + need + "; tier '" + short_tier +
        "' found no room (a GPU holds at most 7 MIG instances, and quotas and shares at most its memory and 100%)");
  }
  return BuildPlan(gpus, tenants, works);
}

}  // namespace gpuslice::ctl
