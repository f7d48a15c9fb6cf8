// `gpuslicectl options`: the shim's environment variables, straight from its option table
// (shim/options.h), so the tool, the shim's error messages and docs/configuration.md cannot disagree.
#pragma once

#include <string>

namespace gpuslice::ctl {

// One block per variable: name, type, default, example, then the meaning wrapped to 80 columns.
std::string RenderOptionsText();

// The Markdown table docs/configuration.md's "Environment reference" carries verbatim (a test compares them).
std::string RenderOptionsMarkdown();

// Prints one of the two on stdout. Returns the exit code.
int RunOptions(bool markdown);

}  // namespace gpuslice::ctl
