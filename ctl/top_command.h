// `gpuslicectl top`: the status as a refreshing terminal view (top_view.h), or one frame with --once.
#pragma once

#include <string>

namespace gpuslice::ctl {

struct TopOptions {
  bool once = false;
  double interval_s = 1.0;    // between refreshes, 0.1 to 60
  std::string state_dir;      // "" = DefaultStateDir()
  std::string sort = "name";  // memory, share, waits or name (`s` cycles them while it runs)
};

// Draws until SIGINT, SIGTERM or `q` (exit 0), fitting the terminal: pages of tenants under
// their GPU's header and the column headings (`n`/space and `p` turn them, `s` changes the sort).
// --once prints one frame of every tenant. On failure one line on stderr.
int RunTop(const TopOptions& options);

}  // namespace gpuslice::ctl
