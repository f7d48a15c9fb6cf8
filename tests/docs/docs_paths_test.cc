// The manual stays a manual:
// - Every file the manual and the code's comments name exists: a path such as
//   `tests/scheduler/grant_policy_test.cc` or `deploy/prometheus/gpuslice-alerts.yaml` in
//   README.md, docs/, a comment or a CMakeLists.txt is checked against the source tree. Dated
//   reports (docs/results/) and CHANGELOG.md are history and may name what has gone since; paths
//   with a wildcard (`tests/scheduler/sched_*_test.cc`), a placeholder (`<name>`) or under the
//   generated report/ are not files.
// - README.md is short (what gpuslice is, the two commands, using it, where to read on), and the
//   manual's pages say what each part does and guarantees: the circumstances of a measurement
//   (the commit it was built from, the machine's load, who else was using it) and the project's
//   history belong in a dated report under docs/results/ or in CHANGELOG.md.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/test_env.h"

namespace gpuslice::testing {
namespace {

namespace fs = std::filesystem;

bool Checked(const fs::path& file, const fs::path& root) {
  const std::string relative = fs::relative(file, root).string();
  if (relative.starts_with("docs/results/") || relative == "CHANGELOG.md") return false;
  const std::string ext = file.extension().string();
  return ext == ".md" || ext == ".h" || ext == ".cc" || ext == ".sh" || ext == ".yaml" || ext == ".py" ||
         file.filename() == "CMakeLists.txt";
}

TEST(DocsPathsTest, EveryFileADocOrCommentNamesExists) {
  const fs::path root = SourceDir();
  const std::regex path(
      R"((^|[^\w/.$-])((?:shim|broker|common|ctl|deviceplugin|exporter|place|sim|tests|bench|scripts|deploy|examples|docs|workload|tools|fuzz|include|cmake|dra)/[A-Za-z0-9_./+-]*[A-Za-z0-9_/])(\*?))");
  int files = 0, names = 0;
  std::vector<std::string> missing;
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator(); ++it) {
    const std::string name = it->path().filename().string();
    if (it->is_directory() && (name.starts_with(".") || name.starts_with("build") || name.starts_with("report") ||
                               name == "__pycache__" || name == "Testing")) {
      it.disable_recursion_pending();
      continue;
    }
    if (!it->is_regular_file() || !Checked(it->path(), root)) continue;
    ++files;
    std::ifstream in(it->path());
    std::string line;
    for (int number = 1; std::getline(in, line); ++number) {
      for (std::sregex_iterator m(line.begin(), line.end(), path), end; m != end; ++m) {
        const std::string named = (*m)[2];
        if ((*m)[3].length() > 0 || named.find('<') != std::string::npos) continue;
        if (named == "dra/v1") continue;  // the kubelet's DRA API version, not a file
        ++names;
        // From the root, or (a CMakeLists.txt's sources) from the file's own directory; a header
        // generated from <name>.in, and a pair named without its extension, count.
        bool found = false;
        for (const fs::path& base : {root, it->path().parent_path()}) {
          for (const std::string suffix : {"", ".in", ".h", ".cc"})
            found = found || fs::exists(base / (named + suffix));
        }
        if (!found)
          missing.push_back(fs::relative(it->path(), root).string() + ":" + std::to_string(number) + ": " + named);
      }
    }
  }
  std::ostringstream list;
  for (const auto& m : missing) list << "\n  " << m;
  EXPECT_TRUE(missing.empty()) << missing.size() << " names of files that do not exist:" << list.str();
  EXPECT_GT(files, 300) << "the scan found too few files";
  EXPECT_GT(names, 500) << "the scan found too few paths";
  std::printf("%d files, %d paths named, %zu missing\n", files, names, missing.size());
}

// What a manual page must not carry: a commit hash, 7 to 40 lowercase hex digits, in backquotes
// with at least one letter (`d6705c3`) or bare with a letter and a digit (commit 7a6c496), so that
// neither a number such as `1048576` nor a word such as "defaced" is one (a UUID or a constant
// with dashes or 0x is not a lone hex token); a machine's load average; a reference to the
// project's issue tracker ("issue 8"); or talk of who else was on the build machine.
std::vector<std::string> LabNotebookLines(const std::string& text) {
  static const std::regex quoted_hash(R"(`[0-9a-f]*[a-f][0-9a-f]*`)");
  static const std::regex bare_hash(R"((^|[^\w./#-])([0-9a-f]{7,40})(?![\w-]))");
  static const std::regex letter_and_digit(R"([a-f].*[0-9]|[0-9].*[a-f])");
  static const std::regex chatter(R"(load average|load avg|loadavg|\bissues? #?[0-9]+|other (sessions|agents))",
                                  std::regex::icase);
  std::vector<std::string> found;
  std::istringstream in(text);
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    bool bad = std::regex_search(line, chatter);
    for (std::sregex_iterator m(line.begin(), line.end(), quoted_hash), end; m != end && !bad; ++m) {
      const size_t digits = m->length() - 2;
      bad = digits >= 7 && digits <= 40;
    }
    for (std::sregex_iterator m(line.begin(), line.end(), bare_hash), end; m != end && !bad; ++m)
      bad = std::regex_search((*m)[2].str(), letter_and_digit);
    if (bad) found.push_back(std::to_string(number) + ": " + line.substr(0, 160));
  }
  return found;
}

TEST(DocsPathsTest, TheReadmeIsShortAndTheManualCarriesNoLabNotebook) {
  const fs::path root = SourceDir();
  std::ifstream readme(root / "README.md");
  const std::string readme_text((std::istreambuf_iterator<char>(readme)), std::istreambuf_iterator<char>());
  EXPECT_LE(std::count(readme_text.begin(), readme_text.end(), '\n'), 150)
      << "README.md is over 150 lines: what gpuslice is, the two commands, using it, installing and where "
         "to read on; the rest belongs in docs/";

  // The manual: README.md, docs/ but its dated results, and the pages beside the examples and the
  // deployment files.
  std::vector<fs::path> pages = {root / "README.md"};
  for (const char* folder : {"docs", "examples", "deploy"}) {
    for (const auto& entry : fs::recursive_directory_iterator(root / folder)) {
      const std::string relative = fs::relative(entry.path(), root).string();
      if (!entry.is_regular_file() || entry.path().extension() != ".md" || relative.starts_with("docs/results/"))
        continue;
      pages.push_back(entry.path());
    }
  }
  std::ostringstream list;
  size_t bad = 0;
  for (const fs::path& page : pages) {
    std::ifstream in(page);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    for (const std::string& line : LabNotebookLines(text)) {
      list << "\n  " << fs::relative(page, root).string() << ":" << line;
      ++bad;
    }
  }
  EXPECT_EQ(bad, 0u) << "lines of a lab notebook in the manual (move the figures' circumstances to a dated "
                        "report in docs/results/, the history to CHANGELOG.md):"
                     << list.str();
  EXPECT_GT(pages.size(), 8u) << "the scan found too few pages";
}

TEST(DocsPathsTest, TheLabNotebookCheckKnowsAHashFromANumberOrAUuid) {
  EXPECT_EQ(LabNotebookLines("built from `bd6f23a`\n").size(), 1u);
  EXPECT_EQ(LabNotebookLines("at a load average of 8\n").size(), 1u);
  EXPECT_EQ(LabNotebookLines("Issue 10's targets\n").size(), 1u);
  EXPECT_EQ(LabNotebookLines("the trace at commit 7a6c496.\n").size(), 1u);
  EXPECT_EQ(LabNotebookLines("(loadavg 5.2)\n").size(), 1u);
  EXPECT_EQ(LabNotebookLines("`1048576` bytes, `GPU-786fde05-e31d`, `0xdeadbeef`, `cafe`\n").size(), 0u);
  EXPECT_EQ(LabNotebookLines("1048576 bytes, a defaced page, GPU-786fde05-e31d, 0xdeadbeef12, #a1b2c3d4\n").size(), 0u);
}

}  // namespace
}  // namespace gpuslice::testing
