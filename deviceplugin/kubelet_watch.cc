#include "deviceplugin/kubelet_watch.h"

#include <poll.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>

#include <fmt/format.h>

namespace gpuslice::deviceplugin {
namespace {

constexpr int kRecheckMs = 1000;  // periodic check when everything is registered
constexpr int kRetryMs = 50;      // retry period while the kubelet is not answering yet

ino_t InodeOf(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 ? st.st_ino : 0;
}

void Log(const std::string& line) { fmt::print(stderr, "{}\n", line); }

// When the process started (near enough: static initialisation), for the registration log line.
const auto kProcessStart = std::chrono::steady_clock::now();

double MillisecondsSinceStart() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - kProcessStart).count();
}

}  // namespace

KubeletWatch::KubeletWatch(const std::string& plugin_dir, std::vector<PluginEndpoint*> endpoints)
    : plugin_dir_(plugin_dir),
      kubelet_socket_(fmt::format("{}/kubelet.sock", plugin_dir)),
      endpoints_(std::move(endpoints)),
      registered_with_(endpoints_.size(), 0),
      last_error_(endpoints_.size()) {}

KubeletWatch::~KubeletWatch() = default;

Status KubeletWatch::Reconcile() {
  const ino_t kubelet = InodeOf(kubelet_socket_);
  bool done = true;
  for (size_t i = 0; i < endpoints_.size(); ++i) {
    PluginEndpoint& endpoint = *endpoints_[i];
    if (!endpoint.SocketIntact()) {
      if (registered_with_[i] != 0)
        Log(fmt::format("gpuslice-device-plugin: {} was removed; serving again", endpoint.socket_path()));
      registered_with_[i] = 0;
      if (Status served = endpoint.Serve(); !served.ok()) return served;
    }
    if (registered_with_[i] == kubelet && kubelet != 0) continue;
    registered_with_[i] = 0;
    std::string failure = fmt::format("gpuslice-device-plugin: waiting for the kubelet's {}", kubelet_socket_);
    if (kubelet != 0) {
      const Status registered = endpoint.Register();
      if (registered.ok()) {
        registered_with_[i] = kubelet;
        last_error_[i].clear();
        Log(fmt::format("gpuslice-device-plugin: registered {} at {}, {:.1f} ms after start", endpoint.resource(),
                        endpoint.socket_path(), MillisecondsSinceStart()));
        continue;
      }
      failure = registered.message();
    }
    if (failure != last_error_[i]) Log(failure);
    last_error_[i] = failure;
    done = false;
  }
  return done ? Status::Ok() : Status::Unavailable("gpuslice-device-plugin: not registered with the kubelet yet");
}

Status KubeletWatch::Run(int stop_fd) {
  inotify_fd_.reset(inotify_init1(IN_CLOEXEC | IN_NONBLOCK));
  if (!inotify_fd_.valid() || inotify_add_watch(inotify_fd_.get(), plugin_dir_.c_str(),
                                                IN_CREATE | IN_DELETE | IN_MOVED_TO | IN_MOVED_FROM) < 0) {
    return Status::Error(fmt::format("gpuslice-device-plugin: cannot watch {} with inotify", plugin_dir_));
  }
  while (true) {
    const Status reconciled = Reconcile();
    if (!reconciled.ok() && reconciled.code() != Status::Code::kUnavailable) return reconciled;
    pollfd fds[2] = {{stop_fd, POLLIN, 0}, {inotify_fd_.get(), POLLIN, 0}};
    if (poll(fds, 2, reconciled.ok() ? kRecheckMs : kRetryMs) < 0 && errno != EINTR) {
      return Status::Error("gpuslice-device-plugin: poll failed");
    }
    if (fds[0].revents & POLLIN) return Status::Ok();
    if (fds[1].revents & POLLIN) {
      alignas(inotify_event) char buffer[4096];
      while (read(inotify_fd_.get(), buffer, sizeof buffer) > 0) {
      }
    }
  }
}

}  // namespace gpuslice::deviceplugin
