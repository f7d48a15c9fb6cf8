#include "ctl/options_command.h"

#include <cstdio>
#include <sstream>

#include <fmt/format.h>

#include "common/exit_codes.h"
#include "shim/options.h"

namespace gpuslice::ctl {
namespace {

// Table cells are prose from the option table: a '|' would split the cell and a '<' would start
// an HTML tag (GPUSLICE_MEMORY_LIMIT_<n> would lose its "<n>").
std::string MarkdownCell(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '|': out += "\\|"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string Wrap(const std::string& text, size_t indent, size_t width) {
  std::istringstream words(text);
  std::string word, out, line;
  while (words >> word) {
    if (!line.empty() && indent + line.size() + 1 + word.size() > width) {
      out += std::string(indent, ' ') + line + "\n";
      line.clear();
    }
    line += (line.empty() ? "" : " ") + word;
  }
  if (!line.empty()) out += std::string(indent, ' ') + line + "\n";
  return out;
}

}  // namespace

std::string RenderOptionsText() {
  std::string out;
  for (const auto& spec : shim::OptionTable()) {
    if (!out.empty()) out += "\n";
    out += fmt::format("{}\n    type: {}\n    default: {}\n    example: {}\n", spec.name, spec.type, spec.fallback,
                       spec.example);
    out += Wrap(spec.meaning, 4, 80);
  }
  return out;
}

std::string RenderOptionsMarkdown() {
  // Names go in code spans, where "<n>" shows as typed and reads as a literal variable name.
  std::string out = "| variable | type | default | meaning |\n|---|---|---|---|\n";
  for (const auto& spec : shim::OptionTable()) {
    out += fmt::format("| `{}` | {} | {} | {} |\n", spec.name, MarkdownCell(spec.type), MarkdownCell(spec.fallback),
                       MarkdownCell(spec.meaning));
  }
  return out;
}

int RunOptions(bool markdown) {
  const std::string text = markdown ? RenderOptionsMarkdown() : RenderOptionsText();
  if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size() || std::fflush(stdout) != 0) return kExitFailure;
  return kExitOk;
}

}  // namespace gpuslice::ctl
