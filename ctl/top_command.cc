#include "ctl/top_command.h"

#include <signal.h>
#include <time.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>

#include <fmt/format.h>

#include "broker/broker.h"
#include "ctl/exit_codes.h"
#include "ctl/status_command.h"
#include "ctl/status_report.h"
#include "ctl/top_view.h"

namespace gpuslice::ctl {
namespace {

volatile sig_atomic_t g_stop = 0;
void OnStop(int) { g_stop = 1; }

int Fail(const std::string& message) {
  std::fprintf(stderr, "gpuslicectl: %s\n", message.c_str());
  return kExitFailed;
}

bool Write(const std::string& text) {
  return std::fwrite(text.data(), 1, text.size(), stdout) == text.size() && std::fflush(stdout) == 0;
}

}  // namespace

int RunTop(const TopOptions& options) {
  const std::string dir = options.state_dir.empty() ? DefaultStateDir() : options.state_dir;
  if (options.once) {
    if (const auto why = ExplainAbsence(dir)) return Fail(*why);
    broker::Snapshot snapshot;
    std::string error;
    if (!broker::TakeSnapshot(dir, &snapshot, &error)) return Fail(WithoutBrokerPrefix(error));
    SortForDisplay(&snapshot);
    return Write(RenderTop(snapshot, nullptr)) ? kExitOk : Fail(fmt::format("writing: {}", std::strerror(errno)));
  }
  struct sigaction action {};
  action.sa_handler = OnStop;
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
  std::optional<broker::Snapshot> previous;
  while (!g_stop) {
    // Home, clear: each frame replaces the last. A missing state file is shown, not fatal: top
    // waits for the first tenant.
    std::string frame = "\033[H\033[2J" + fmt::format("gpuslicectl top: {} every {:g} s (Ctrl-C quits)\n\n", dir,
                                                     options.interval_s);
    broker::Snapshot snapshot;
    std::string error;
    if (const auto why = ExplainAbsence(dir)) {
      frame += *why + "\n";
      previous.reset();
    } else if (!broker::TakeSnapshot(dir, &snapshot, &error)) {
      frame += WithoutBrokerPrefix(error) + "\n";
      previous.reset();
    } else {
      SortForDisplay(&snapshot);
      frame += RenderTop(snapshot, previous ? &*previous : nullptr);
      previous = std::move(snapshot);
    }
    if (!Write(frame)) return Fail(fmt::format("writing: {}", std::strerror(errno)));
    timespec pause{static_cast<time_t>(options.interval_s), static_cast<long>((options.interval_s - static_cast<time_t>(options.interval_s)) * 1e9)};
    while (!g_stop && nanosleep(&pause, &pause) != 0 && errno == EINTR) {
    }
  }
  return kExitOk;
}

}  // namespace gpuslice::ctl
