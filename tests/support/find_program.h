// Finding a program the tests run but gpuslice does not build (prometheus, promtool, tmux).
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

namespace gpuslice::testing {

// The first executable called `name` in /usr/bin, /usr/local/bin or $PATH; "" if none.
inline std::string FindProgram(const std::string& name) {
  std::vector<std::string> dirs = {"/usr/bin", "/usr/local/bin"};
  if (const char* path = std::getenv("PATH")) {
    std::string all = path;
    for (size_t start = 0, end; start <= all.size(); start = end + 1) {
      end = all.find(':', start);
      if (end == std::string::npos) end = all.size();
      dirs.push_back(all.substr(start, end - start));
    }
  }
  for (const auto& dir : dirs) {
    const std::string candidate = dir + "/" + name;
    if (!dir.empty() && access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

}  // namespace gpuslice::testing
