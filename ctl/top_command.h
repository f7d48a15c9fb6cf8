// `gpuslicectl top`: the status as a refreshing terminal view (top_view.h), or one frame with --once.
#pragma once

#include <string>

namespace gpuslice::ctl {

struct TopOptions {
  bool once = false;
  double interval_s = 1.0;  // between refreshes, 0.1 to 60
  std::string state_dir;    // "" = DefaultStateDir()
};

// Draws until SIGINT or SIGTERM (exit 0); --once prints one frame. On failure one line on stderr.
int RunTop(const TopOptions& options);

}  // namespace gpuslice::ctl
