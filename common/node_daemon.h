// What the two node daemons, gpuslice-device-plugin and gpuslice-dra-driver, share at their
// entry: the way they fail (exit codes of common/exit_codes.h), and how they take their stop signals.
#pragma once

#include <signal.h>

#include <cstdio>
#include <string>

#include "common/exit_codes.h"

namespace gpuslice::node_daemon {

// Says `line` on stderr; answers `code`, for `return Fail(...)` from main.
inline int Fail(int code, const std::string& line) {
  std::fprintf(stderr, "%s\n", line.c_str());
  return code;
}

// Blocks SIGTERM and SIGINT in the calling thread, and with it in every thread it starts later
// (call it before any starts: NVML's own among them), so that the daemon takes them when it
// chooses (signalfd, sigtimedwait); ignores SIGPIPE (a peer that hangs up is an error value).
// Answers the set blocked.
inline sigset_t BlockStopSignals() {
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);
  return stop_signals;
}

}  // namespace gpuslice::node_daemon
