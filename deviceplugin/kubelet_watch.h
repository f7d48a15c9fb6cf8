// Keeps the plugin registered for as long as it runs: a kubelet restart deletes every socket in
// the device-plugins directory and creates a new kubelet.sock, after which each plugin must
// serve again and call Register again. The directory is watched with inotify (a change is
// handled at once) and rechecked every second besides (a missed event costs at most that).
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "common/status.h"
#include "common/unique_fd.h"
#include "deviceplugin/plugin_endpoint.h"

namespace gpuslice::deviceplugin {

class KubeletWatch {
 public:
  KubeletWatch(const std::string& plugin_dir, std::vector<PluginEndpoint*> endpoints);
  ~KubeletWatch();

  // Serves and registers every endpoint, then keeps them so until `stop_fd` is readable (the
  // signalfd of SIGTERM and SIGINT). An error with one line when a socket cannot be served or
  // the directory cannot be watched.
  Status Run(int stop_fd);

 private:
  // Brings every endpoint to "serving, registered with the current kubelet": ok when done,
  // Unavailable while the kubelet has not registered one yet (its line logged; try again), any
  // other error when an endpoint cannot serve (the end of Run).
  Status Reconcile();

  std::string plugin_dir_;
  std::string kubelet_socket_;
  std::vector<PluginEndpoint*> endpoints_;
  std::vector<ino_t> registered_with_;   // per endpoint: the kubelet.sock it registered with, 0 = none
  std::vector<std::string> last_error_;  // per endpoint, so that a retry loop logs a failure once
  UniqueFd inotify_fd_;
};

}  // namespace gpuslice::deviceplugin
