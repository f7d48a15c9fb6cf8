#include "ctl/subcommand_hint.h"

#include <algorithm>

#include <fmt/format.h>

#include "common/edit_distance.h"

namespace gpuslice::ctl {

std::optional<std::string> UnknownSubcommand(int argc, char** argv, const std::vector<std::string>& subcommands) {
  // Only the top level takes no option with a value, so the first word not starting with '-' is
  // where the subcommand belongs.
  for (int i = 1; i < argc; ++i) {
    const std::string word = argv[i];
    if (word == "--") return std::nullopt;
    if (word.starts_with("-")) continue;
    if (std::find(subcommands.begin(), subcommands.end(), word) != subcommands.end()) return std::nullopt;
    std::string nearest;
    size_t best = 4;  // farther than 3 edits is not a typo
    for (const auto& candidate : subcommands) {
      const size_t distance = EditDistance(word, candidate);
      if (distance < best || (candidate.starts_with(word) && distance <= best)) {
        best = distance;
        nearest = candidate;
      }
    }
    return fmt::format("unknown subcommand '{}'{}; the subcommands are {}", word,
                       nearest.empty() ? "" : fmt::format(" (did you mean {}?)", nearest),
                       fmt::join(subcommands, ", "));
  }
  return std::nullopt;
}

}  // namespace gpuslice::ctl
