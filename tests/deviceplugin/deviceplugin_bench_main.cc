// gpuslice-device-plugin-bench: the plugin's targets measured on the real binary over the
// simulated NVML, driven by the tests' fake kubelet (docs/kubernetes.md quotes its output):
// registration after start, re-registration after a kubelet restart, a lost GPU reaching
// ListAndWatch, Allocate latency for one container of 80 slices, and the plugin's RSS.
//
//   gpuslice-device-plugin-bench [--gpus 8] [--memory 141Gi] [--allocates 2000] [--rounds 5]
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "tests/deviceplugin/deviceplugin_fake_kubelet.h"
#include "tests/support/test_env.h"

using namespace gpuslice::testing;
using Clock = std::chrono::steady_clock;

namespace {

double Ms(Clock::time_point since) { return std::chrono::duration<double, std::milli>(Clock::now() - since).count(); }

double Percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * v.size()))];
}

long RssKib(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string gpus = "8", memory = "141Gi";
  int allocates = 2000, rounds = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--gpus") gpus = value;
    else if (flag == "--memory") memory = value;
    else if (flag == "--allocates") allocates = std::stoi(value);
    else if (flag == "--rounds") rounds = std::stoi(value);
    else return std::fprintf(stderr, "usage: %s [--gpus N] [--memory Q] [--allocates N] [--rounds N]\n", argv[0]), 2;
  }
  const std::string state = "/dev/shm/gsdp-bench-" + std::to_string(getpid());
  setenv("GPUSLICE_SIM_STATE", state.c_str(), 1);
  setenv("GPUSLICE_SIM_DEVICES", gpus.c_str(), 1);
  setenv("GPUSLICE_SIM_MEMORY", memory.c_str(), 1);
  const std::string dir = MakePluginDir();
  FakeKubelet kubelet(dir);
  kubelet.Start();

  const auto started = Clock::now();
  auto plugin = StartPlugin(dir);
  if (!kubelet.WaitForRegistrations(1, 30000))
    return std::fprintf(stderr, "no registration\n%s", plugin->StderrSoFar().c_str()), 1;
  const double register_ms = Ms(started);

  std::vector<double> reregister_ms;
  for (int r = 0; r < rounds; ++r) {
    kubelet.Stop();
    kubelet.DeleteSockets();
    const auto restarted = Clock::now();
    kubelet.Start();
    if (!kubelet.WaitForRegistrations(1, 30000)) return std::fprintf(stderr, "no re-registration\n"), 1;
    reregister_ms.push_back(Ms(restarted));
  }

  auto memory_stub = kubelet.Connect("gpuslice.io/gpu");
  const auto ids = FirstList(*memory_stub);
  // Health: a lost GPU's slices turn Unhealthy in an open ListAndWatch stream.
  std::vector<double> health_ms;
  {
    grpc::ClientContext context;
    auto reader = memory_stub->ListAndWatch(&context, v1beta1::Empty());
    v1beta1::ListAndWatchResponse list;
    reader->Read(&list);
    for (int r = 0; r < rounds; ++r) {
      for (const char* clear : {"", "--clear"}) {
        std::vector<std::string> command = {BinDir() + "/gpuslice-sim", "gpu-lost", "0", "--state", state};
        if (*clear) command.push_back(clear);
        const auto marked = Clock::now();
        Run(command);
        reader->Read(&list);
        if (!*clear) health_ms.push_back(Ms(marked));
      }
    }
    context.TryCancel();
    reader->Finish();
  }

  v1beta1::AllocateRequest request;
  auto* container = request.add_container_requests();
  for (int k = 0; k < 80 && k < static_cast<int>(ids.size()); ++k) container->add_devices_ids(ids[k].id());
  std::vector<double> allocate_us;
  for (int i = 0; i < allocates; ++i) {
    v1beta1::AllocateResponse response;
    grpc::ClientContext context;
    const auto t = Clock::now();
    if (!memory_stub->Allocate(&context, request, &response).ok()) return std::fprintf(stderr, "Allocate failed\n"), 1;
    allocate_us.push_back(Ms(t) * 1000);
  }
  const long rss = RssKib(plugin->pid());
  std::printf(
      "{\"gpus\":%s,\"memory\":\"%s\",\"ids\":%zu,\"register_ms_from_exec\":%.1f,"
      "\"reregister_ms_p50\":%.1f,\"reregister_ms_max\":%.1f,\"unhealthy_ms_p50\":%.1f,\"unhealthy_ms_max\":%.1f,"
      "\"allocate_80_slices_us_p50\":%.0f,\"allocate_80_slices_us_p99\":%.0f,\"allocates\":%d,\"plugin_rss_mib\":%.1f}\n",
      gpus.c_str(), memory.c_str(), ids.size(), register_ms, Percentile(reregister_ms, 0.5),
      Percentile(reregister_ms, 1.0), Percentile(health_ms, 0.5), Percentile(health_ms, 1.0),
      Percentile(allocate_us, 0.5), Percentile(allocate_us, 0.99), allocates, rss / 1024.0);
  plugin.reset();
  kubelet.Stop();
  RemovePluginDir(dir);
  unlink(state.c_str());
  return 0;
}
