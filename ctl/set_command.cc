#include "ctl/set_command.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "broker/checked_index.h"
#include "broker/sched_terms.h"
#include "broker/scheduler.h"
#include "broker/segment_file.h"
#include "broker/segment_layout.h"
#include "broker/uuid.h"
#include "common/exit_codes.h"
#include "common/status.h"
#include "ctl/status_command.h"
#include "ctl/status_report.h"
#include "ctl/units.h"

namespace gpuslice::ctl {
namespace {

int Say(int code, const std::string& message) {
  std::fprintf(stderr, "gpuslicectl: %s\n", message.c_str());
  return code;
}

bool ParseMode(const std::string& text, broker::SharingMode* mode) {
  for (auto candidate : {broker::SharingMode::kTimeslice, broker::SharingMode::kNone, broker::SharingMode::kMps}) {
    if (text == ModeName(static_cast<uint32_t>(candidate))) {
      *mode = candidate;
      return true;
    }
  }
  return false;
}

// A duration `set` changes (--quantum, --budget): its flag, its valid range and the built-in
// default that 0 ("default") stands for.
struct DurationSetting {
  const char* flag;
  const char* examples;  // valid values, for the error line
  uint64_t min_ns, max_ns;
  const char* range;  // the range in words, for the error line
  uint64_t default_ns;
};

constexpr DurationSetting kQuantum{.flag = "--quantum",
                                   .examples = "10ms, 2500us or 0.05s",
                                   .min_ns = kMinQuantumNs,
                                   .max_ns = kMaxQuantumNs,
                                   .range = "a quantum is 1ms to 1s",
                                   .default_ns = broker::kDefaultQuantumNs};
constexpr DurationSetting kBudget{.flag = "--budget",
                                  .examples = "2ms or 500us",
                                  .min_ns = kMinBudgetNs,
                                  .max_ns = kMaxBudgetNs,
                                  .range = "a budget is 100us to 100ms",
                                  .default_ns = broker::kDefaultBudgetNs};

// The setting's value from the command line: 0 for "default"; an error line when `text` is not a
// duration in range.
Result<uint64_t> ParseSetting(const DurationSetting& setting, const std::string& text) {
  if (text == "default") return uint64_t{0};
  uint64_t ns = 0;
  if (!ParseDuration(text, &ns)) {
    return Status::InvalidArgument(
        fmt::format("{} '{}' is not a duration: give a number and a unit (ns, us, ms, s) such as {}, or default",
                    setting.flag, text, setting.examples));
  }
  if (ns < setting.min_ns || ns > setting.max_ns) {
    return Status::InvalidArgument(fmt::format("{} {} is out of range: {}, or default ({})", setting.flag, text,
                                               setting.range, FormatDuration(setting.default_ns)));
  }
  return ns;
}

std::string SettingText(const DurationSetting& setting, uint64_t ns) {
  return ns == 0 ? fmt::format("{} (default)", FormatDuration(setting.default_ns)) : FormatDuration(ns);
}

std::string Change(const std::string& before, const std::string& after) {
  return before == after ? fmt::format("{} (unchanged)", after) : fmt::format("{} -> {}", before, after);
}

struct Target {
  broker::GpuIndex index;
  uint8_t uuid[16];
};

}  // namespace

int RunSet(const SetOptions& options) {
  // 1. The command line, before anything is read: usage errors exit 2.
  if (!options.gpu) return Say(kExitUsage, "set needs --gpu: a GPU's UUID as `gpuslicectl status` prints it, or all");
  if (!options.mode && !options.quantum && !options.budget)
    return Say(kExitUsage, "set changes nothing without --quantum, --mode or --budget (see gpuslicectl set --help)");

  std::optional<broker::SharingMode> mode;
  if (options.mode) {
    broker::SharingMode parsed;
    if (!ParseMode(*options.mode, &parsed))
      return Say(kExitUsage, fmt::format("--mode '{}' is not a sharing mode: use timeslice (tenants take turns), "
                                         "none (memory quotas only) or mps",
                                         *options.mode));
    mode = parsed;
  }

  std::optional<uint64_t> quantum, budget;  // 0: the built-in default
  if (options.quantum) {
    const Result<uint64_t> parsed = ParseSetting(kQuantum, *options.quantum);
    if (!parsed.ok()) return Say(kExitUsage, parsed.message());
    quantum = *parsed;
  }
  if (options.budget) {
    const Result<uint64_t> parsed = ParseSetting(kBudget, *options.budget);
    if (!parsed.ok()) return Say(kExitUsage, parsed.message());
    budget = *parsed;
  }

  const bool all = *options.gpu == "all";
  uint8_t wanted[16] = {};
  if (!all && !broker::ParseUuid(*options.gpu, wanted))
    return Say(kExitUsage, fmt::format("--gpu '{}' is not a GPU UUID: give one as `gpuslicectl status` prints it "
                                       "(GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx), or all",
                                       *options.gpu));

  // 2. The state: missing, incompatible or read-only exits 1.
  const std::string dir = options.state_dir.empty() ? DefaultStateDir() : options.state_dir;
  if (const auto why = ExplainAbsence(dir)) return Say(kExitFailure, *why);
  std::string error;
  std::unique_ptr<broker::SegmentFile> file;
  try {
    Result<std::unique_ptr<broker::SegmentFile>> opened =
        broker::OpenSegmentFile(dir, broker::OpenMode::kAttachExisting);
    if (opened.ok()) file = std::move(opened).value();
    else error = opened.message();
  } catch (...) {
    error = "out of memory mapping the broker state";
  }
  if (!file) return Say(kExitFailure, WithoutBrokerPrefix(error));
  if (!file->writable)
    return Say(kExitFailure, fmt::format("cannot change the policy: no write permission on {} (run gpuslicectl set "
                                         "as a member of the file's group, or as root)",
                                         file->path));
  broker::Segment* segment = file->segment;

  std::vector<Target> targets;
  for (broker::GpuIndex g : broker::UsedGpus(*segment)) {
    const broker::GpuEntry& gpu = broker::At(*segment, g);
    if (gpu.state.load() != static_cast<uint32_t>(broker::EntryState::kInUse)) continue;
    Target target{g, {}};
    const uint64_t words[2] = {gpu.uuid[0].load(), gpu.uuid[1].load()};
    std::memcpy(target.uuid, words, sizeof target.uuid);
    if (all || std::memcmp(target.uuid, wanted, sizeof wanted) == 0) targets.push_back(target);
  }
  if (targets.empty()) {
    return Say(kExitFailure,
               all ? fmt::format("no GPU in {} yet: a GPU appears there once a tenant has used it", file->path)
                   : fmt::format("no GPU {} in {}: a GPU appears there once a tenant has used it "
                                 "(gpuslicectl status lists them)",
                                 *options.gpu, file->path));
  }

  // 3. The change, GPU by GPU, each under its scheduler mutex (broker::SetGpuPolicy).
  std::string report;
  for (const Target& target : targets) {
    broker::GpuEntry& gpu = broker::At(*segment, target.index);
    const uint32_t old_mode = gpu.mode.load();
    const uint64_t old_quantum = gpu.quantum_ns.load();
    const auto new_mode = mode.value_or(static_cast<broker::SharingMode>(old_mode));
    const uint64_t new_quantum = quantum.value_or(old_quantum);
    const uint64_t old_budget = gpu.budget_ns.load();
    const uint64_t new_budget = budget.value_or(old_budget);
    Status changed = broker::SetGpuPolicy(segment, target.uuid, new_mode, new_quantum);
    if (changed.ok()) changed = broker::SetGpuBudget(segment, target.uuid, new_budget);
    if (!changed.ok()) return Say(kExitFailure, WithoutBrokerPrefix(changed.message()));
    report += fmt::format("GPU {}: mode {}, quantum {}, budget {}\n", broker::FormatUuid(target.uuid),
                          Change(ModeName(old_mode), ModeName(static_cast<uint32_t>(new_mode))),
                          Change(SettingText(kQuantum, old_quantum), SettingText(kQuantum, new_quantum)),
                          Change(SettingText(kBudget, old_budget), SettingText(kBudget, new_budget)));
  }
  if (std::fwrite(report.data(), 1, report.size(), stdout) != report.size() || std::fflush(stdout) != 0)
    return Say(kExitFailure, fmt::format("writing the report: {}", std::strerror(errno)));
  return kExitOk;
}

}  // namespace gpuslice::ctl
