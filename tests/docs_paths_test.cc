// Every file the manual and the code's comments name exists: a path such as
// `tests/grant_policy_test.cc` or `deploy/prometheus/gpuslice-alerts.yaml` in README.md, docs/,
// a comment or a CMakeLists.txt is checked against the source tree. Dated reports
// (docs/reports/) and CHANGELOG.md are history and may name what has gone since; paths with a
// wildcard (`tests/sched_*_test.cc`), a placeholder (`<name>`) or under the generated report/
// are not files.
#include <gtest/gtest.h>

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
  if (relative.starts_with("docs/reports/") || relative == "CHANGELOG.md") return false;
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
        if (!found) missing.push_back(fs::relative(it->path(), root).string() + ":" + std::to_string(number) + ": " + named);
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

}  // namespace
}  // namespace gpuslice::testing
