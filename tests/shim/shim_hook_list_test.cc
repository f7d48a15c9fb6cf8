// The version script exports exactly the hooks of shim/hook_list.h (plus dlsym): a hook left
// out of the script would be defined but never called; a name in the script without a hook
// would not link.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "tests/support/test_env.h"

namespace gpuslice::testing {
namespace {

std::string ReadSource(const std::string& relative) {
  std::ifstream in(SourceDir() + "/" + relative);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::set<std::string> Matches(const std::string& text, const std::regex& pattern) {
  std::set<std::string> names;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), pattern); it != std::sregex_iterator(); ++it)
    names.insert((*it)[1]);
  return names;
}

TEST(ShimHookListTest, VersionScriptExportsExactlyTheHooks) {
  const std::string list = ReadSource("shim/hook_list.h");
  const std::string hooks_only = list.substr(0, list.find("GPUSLICE_DRIVER_CALLS")) +
                                 list.substr(list.find("GPUSLICE_NVML_HOOKS"),
                                             list.find("GPUSLICE_NVML_CALLS") - list.find("GPUSLICE_NVML_HOOKS"));
  std::set<std::string> hooks = Matches(hooks_only, std::regex(R"(X\((\w+)\))"));
  hooks.insert("dlsym");
  const std::string map = ReadSource("shim/libgpuslice.map");
  const std::string globals = map.substr(map.find("global:"), map.find("local:") - map.find("global:"));
  const std::set<std::string> exported = Matches(globals, std::regex(R"((\w+);)"));
  EXPECT_EQ(hooks, exported);
  EXPECT_GT(hooks.size(), 20u);
}

}  // namespace
}  // namespace gpuslice::testing
