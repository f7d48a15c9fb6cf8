// The first word of gpuslicectl's command line when it is not one of its subcommands, explained
// with the nearest subcommand ("did you mean status?"): CLI11 alone would only say that a
// subcommand is required, which hides the typo.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace gpuslice::ctl {

// Empty when the first argument that is not an option is a known subcommand, or when there is
// none (CLI11 then reports what is missing); otherwise one line of explanation.
std::optional<std::string> UnknownSubcommand(int argc, char** argv, const std::vector<std::string>& subcommands);

}  // namespace gpuslice::ctl
