#include "ctl/subcommand_hint.h"

#include <algorithm>
#include <numeric>

#include <fmt/format.h>

namespace gpuslice::ctl {

size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  std::iota(row.begin(), row.end(), 0);
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

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
