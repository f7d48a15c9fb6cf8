// fork() while another thread makes the process's first CUDA call, during which the shim attaches
// to the broker under a process-wide lock: the child's own first CUDA call must still return.
//
//   gpuslice-test-fork-during-attach DELAY_US [--in-prepare]
//
// A second thread calls cuInit; DELAY_US after starting it, the main thread forks. With
// --in-prepare the fork comes first: a fork handler of the program's own, registered in main (so
// run before the shim's), starts the other thread's cuInit and waits DELAY_US before the fork goes
// on. That thread's first call then begins while a fork() is already under way, which is where a
// library registering its fork handlers at that first call has them missed by this fork. The
// child calls cuInit and exits 0 on CUDA_SUCCESS. The parent waits up to 10 s for it, kills it if
// it is still running, and prints one JSON line, {"event":"result","child":"exit 0"} (or "exit N",
// "signal N", "stuck"); it exits 0 whatever the child did (the test judges). One fork a process:
// the shim attaches once.
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include <cuda.h>

namespace {

// The child's status, or "stuck" when it has not exited within `seconds` (it is then killed).
std::string WaitForChild(pid_t child, int seconds) {
  for (int waited_ms = 0; waited_ms < seconds * 1000; ++waited_ms) {
    int status = 0;
    const pid_t done = waitpid(child, &status, WNOHANG);
    if (done == child) {
      return WIFEXITED(status) ? "exit " + std::to_string(WEXITSTATUS(status))
                               : "signal " + std::to_string(WTERMSIG(status));
    }
    if (done < 0) return "waitpid failed";
    const timespec ms{0, 1000000};
    nanosleep(&ms, nullptr);
  }
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  return "stuck";
}

void SleepMicroseconds(long us) {
  const timespec delay{us / 1000000, (us % 1000000) * 1000};
  nanosleep(&delay, nullptr);
}

std::atomic<bool> g_start_first_call{false};
long g_prepare_delay_us = 0;

void StartFirstCallThenWait() {
  g_start_first_call.store(true);
  SleepMicroseconds(g_prepare_delay_us);
}

}  // namespace

int main(int argc, char** argv) {
  const bool in_prepare = argc == 3 && std::string(argv[2]) == "--in-prepare";
  if (argc != 2 && !in_prepare) {
    std::fprintf(stderr, "usage: gpuslice-test-fork-during-attach DELAY_US [--in-prepare]\n");
    return 2;
  }
  const long delay_us = std::strtol(argv[1], nullptr, 10);
  if (in_prepare) {
    g_prepare_delay_us = delay_us;
    pthread_atfork(StartFirstCallThenWait, nullptr, nullptr);
  } else {
    g_start_first_call.store(true);
  }
  // Detached, its end awaited by a flag: a thread running when the parent forks is, in the
  // child, one that TSan (CI's TSan pass) still counts but nobody can join, and a joinable one
  // would be reported as leaked at the child's exit (exit code 66).
  static std::atomic<bool> first_call_done{false};
  std::thread([] {
    while (!g_start_first_call.load()) sched_yield();
    (void)cuInit(0);
    first_call_done.store(true);
  }).detach();
  if (!in_prepare) SleepMicroseconds(delay_us);
  const pid_t child = fork();
  if (child == 0) _exit(cuInit(0) == CUDA_SUCCESS ? 0 : 1);
  const std::string how = child < 0 ? "fork failed" : WaitForChild(child, 10);
  while (!first_call_done.load()) {
    const timespec ms{0, 1000000};
    nanosleep(&ms, nullptr);
  }
  std::printf("{\"event\":\"result\",\"child\":\"%s\"}\n", how.c_str());
  return 0;
}
