#include "ctl/top_command.h"

#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>

#include <fmt/format.h>

#include "broker/snapshot.h"
#include "common/exit_codes.h"
#include "ctl/status_command.h"
#include "ctl/status_device.h"
#include "ctl/status_report.h"
#include "ctl/top_view.h"

namespace gpuslice::ctl {
namespace {

volatile sig_atomic_t g_stop = 0;
void OnStop(int) { g_stop = 1; }

int Fail(const std::string& message) {
  std::fprintf(stderr, "gpuslicectl: %s\n", message.c_str());
  return kExitFailure;
}

bool Write(const std::string& text) {
  return std::fwrite(text.data(), 1, text.size(), stdout) == text.size() && std::fflush(stdout) == 0;
}

std::optional<TopSort> ParseSort(const std::string& name) {
  for (TopSort sort : {TopSort::kMemory, TopSort::kShare, TopSort::kWaits, TopSort::kName})
    if (name == TopSortName(sort)) return sort;
  return std::nullopt;
}

// Keys are read one at a time, unechoed, while top runs on a terminal; the terminal's own mode
// comes back when top ends.
class RawKeys {
 public:
  RawKeys() {
    if (!isatty(STDIN_FILENO) || tcgetattr(STDIN_FILENO, &saved_) != 0) return;
    termios raw = saved_;
    raw.c_lflag &= ~static_cast<tcflag_t>(ICANON | ECHO);
    raw.c_cc[VMIN] = 0;
    raw.c_cc[VTIME] = 0;
    active_ = tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0;
  }
  ~RawKeys() {
    if (active_) tcsetattr(STDIN_FILENO, TCSANOW, &saved_);
  }
  // Waits up to `seconds` for a key; 0 when none came (or stdin is not a terminal: then it sleeps).
  char Wait(double seconds) {
    if (!active_) {
      timespec pause{static_cast<time_t>(seconds), static_cast<long>((seconds - static_cast<time_t>(seconds)) * 1e9)};
      while (!g_stop && nanosleep(&pause, &pause) != 0 && errno == EINTR) {
      }
      return 0;
    }
    pollfd in{STDIN_FILENO, POLLIN, 0};
    if (poll(&in, 1, static_cast<int>(seconds * 1000)) <= 0) return 0;
    char key = 0;
    return read(STDIN_FILENO, &key, 1) == 1 ? key : 0;
  }

 private:
  termios saved_{};
  bool active_ = false;
};

// The terminal's size; 0 x 0 when stdout is not one.
std::pair<int, int> TerminalSize() {
  winsize size{};
  if (!isatty(STDOUT_FILENO) || ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) != 0) return {0, 0};
  return {size.ws_col, size.ws_row};
}

}  // namespace

int RunTop(const TopOptions& options) {
  const std::string dir = options.state_dir.empty() ? DefaultStateDir() : options.state_dir;
  const auto sort = ParseSort(options.sort);
  if (!sort) {
    Fail("--sort '" + options.sort + "': expected memory, share, waits or name");
    return kExitUsage;
  }
  TopLayout layout;
  layout.sort = *sort;
  if (options.once) {
    if (const auto why = ExplainAbsence(dir)) return Fail(*why);
    Result<broker::Snapshot> taken = broker::TakeSnapshot(dir);
    if (!taken.ok()) return Fail(WithoutBrokerPrefix(taken.message()));
    broker::Snapshot snapshot = std::move(taken).value();
    SortForDisplay(&snapshot);
    layout.width = TerminalSize().first;  // every tenant, in rows that fit the terminal if any
    const DeviceFiguresByUuid devices = ReadDeviceFigures();
    return Write(RenderTop(snapshot, nullptr, layout, &devices).text)
               ? kExitOk
               : Fail(fmt::format("writing: {}", std::strerror(errno)));
  }
  struct sigaction action {};
  action.sa_handler = OnStop;
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
  RawKeys keys;
  std::optional<broker::Snapshot> previous;
  bool redraw_only = false;  // a key was pressed: redraw the same snapshot, do not take another
  broker::Snapshot snapshot;
  DeviceFiguresByUuid devices;  // NVML's, read with each snapshot
  std::string problem;
  while (!g_stop) {
    const auto [columns, rows] = TerminalSize();
    layout.width = columns;
    layout.height = rows > 0 ? std::max(4, rows - 3) : 0;  // the title, a blank line, the footer
    if (!redraw_only) {
      problem.clear();
      broker::Snapshot next;
      if (const auto why = ExplainAbsence(dir)) {
        problem = *why;
      } else if (Result<broker::Snapshot> taken = broker::TakeSnapshot(dir); !taken.ok()) {
        problem = WithoutBrokerPrefix(taken.message());
      } else {
        next = std::move(taken).value();
        SortForDisplay(&next);
      }
      if (problem.empty()) {
        if (!snapshot.gpus.empty() || snapshot.taken_ns != 0) previous = std::move(snapshot);
        snapshot = std::move(next);
        devices = ReadDeviceFigures();
      } else {
        previous.reset();
      }
    }
    // Home, clear: each frame replaces the last. A missing state file is shown, not fatal: top
    // waits for the first tenant.
    std::string frame = "\033[H\033[2J" + fmt::format("gpuslicectl top: {} every {:g} s\n\n", dir, options.interval_s);
    if (!problem.empty()) {
      frame += problem + "\n";
    } else {
      const TopFrame drawn = RenderTop(snapshot, previous ? &*previous : nullptr, layout, &devices);
      layout.page = drawn.page;
      frame += drawn.text;
      frame += fmt::format("page {}/{}, sorted by {}: s sort  n/space next page  p previous  q quit", drawn.page + 1,
                           drawn.pages, TopSortName(layout.sort));
    }
    if (!Write(frame)) return Fail(fmt::format("writing: {}", std::strerror(errno)));
    const char key = keys.Wait(options.interval_s);
    redraw_only = key != 0;
    if (key == 'q' || key == 'Q') break;
    if (key == 's') layout.sort = NextTopSort(layout.sort), layout.page = 0;
    if (key == 'n' || key == ' ') ++layout.page;
    if (key == 'p' && layout.page > 0) --layout.page;
  }
  return kExitOk;
}

}  // namespace gpuslice::ctl
