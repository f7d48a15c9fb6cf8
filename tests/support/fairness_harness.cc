#include "tests/support/fairness_harness.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <sstream>
#include <thread>

#include "broker/broker.h"
#include "broker/scheduler.h"
#include "broker/uuid.h"
#include "gpuslice/sim_query.h"

namespace gpuslice::fairness {

uint64_t NowNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ULL + static_cast<uint64_t>(ts.tv_nsec);
}

void SleepFor(double seconds) {
  if (seconds > 0) std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
}

double Percentile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(values.size())));
  rank = std::clamp<size_t>(rank, 1, values.size());
  return values[rank - 1];
}

// --- Child ---

Json Child::Result() const {
  Json found;
  std::istringstream in(Stdout());
  for (std::string line; std::getline(in, line);) {
    Json j = Json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_object() && j.value("event", "") == "result") found = std::move(j);
  }
  return found;
}

// --- measurements ---

std::map<std::string, uint64_t> BusyBetween(const Sample& a, const Sample& b) {
  std::map<std::string, uint64_t> busy;
  for (const auto& [tenant, ns] : b.busy_by_tenant) {
    const auto it = a.busy_by_tenant.find(tenant);
    const uint64_t before = it == a.busy_by_tenant.end() ? 0 : it->second;
    busy[tenant] = ns >= before ? ns - before : 0;
  }
  return busy;
}

std::map<std::string, double> SharesBetween(const Sample& a, const Sample& b) {
  const auto busy = BusyBetween(a, b);
  uint64_t total = 0;
  for (const auto& [tenant, ns] : busy) total += ns;
  std::map<std::string, double> shares;
  for (const auto& [tenant, ns] : busy)
    shares[tenant] = total ? static_cast<double>(ns) / static_cast<double>(total) : 0;
  return shares;
}

double BusyFraction(const Sample& a, const Sample& b, const std::string& tenant) {
  if (b.t_ns <= a.t_ns) return 0;
  uint64_t busy = 0;
  if (tenant.empty()) {
    busy = b.device_busy_ns - a.device_busy_ns;
  } else {
    const auto all = BusyBetween(a, b);
    if (const auto it = all.find(tenant); it != all.end()) busy = it->second;
  }
  return static_cast<double>(busy) / static_cast<double>(b.t_ns - a.t_ns);
}

double Jain(const std::vector<double>& x) {
  double sum = 0, squares = 0;
  for (double v : x) {
    sum += v;
    squares += v * v;
  }
  return squares > 0 ? sum * sum / (static_cast<double>(x.size()) * squares) : 0;
}

// --- Gpu ---

Gpu::Gpu(Paths paths, const std::string& tag) : paths_(std::move(paths)), own_files_(true) {
  static std::atomic<int> counter{0};
  const std::string name = "gpuslice-fair-" + std::to_string(getpid()) + "-" + std::to_string(++counter) + "-" + tag;
  sim_state_ = "/dev/shm/" + name;
  state_dir_ = "/tmp/" + name;
  unlink(sim_state_.c_str());
  std::error_code ignored;
  std::filesystem::remove_all(state_dir_, ignored);
}

Gpu::Gpu(Paths paths, std::string sim_state, std::string state_dir)
    : paths_(std::move(paths)), sim_state_(std::move(sim_state)), state_dir_(std::move(state_dir)) {}

Gpu::~Gpu() {
  for (auto& child : children_) child->Kill(SIGKILL);
  children_.clear();
  if (own_files_) {
    unlink(sim_state_.c_str());
    std::error_code ignored;
    std::filesystem::remove_all(state_dir_, ignored);
  }
}

Child* Gpu::Start(const std::string& tenant, const std::vector<std::string>& workload_args,
                  const StartOptions& options) {
  std::vector<std::string> argv = {paths_.bin_dir + "/gpuslice-workload"};
  argv.insert(argv.end(), workload_args.begin(), workload_args.end());
  argv.insert(argv.end(), {"--label", tenant});
  std::vector<std::string> env = {"LD_LIBRARY_PATH=" + paths_.sim_lib_dir, "GPUSLICE_SIM_STATE=" + sim_state_};
  if (options.managed) {
    env.insert(env.end(),
               {"LD_PRELOAD=" + paths_.shim_path, "GPUSLICE_STATE_DIR=" + state_dir_, "GPUSLICE_TENANT=" + tenant});
    if (options.request_pct) env.push_back("GPUSLICE_COMPUTE_REQUEST=" + std::to_string(options.request_pct) + "%");
    if (options.limit_pct) env.push_back("GPUSLICE_COMPUTE_LIMIT=" + std::to_string(options.limit_pct) + "%");
  }
  env.insert(env.end(), options.env.begin(), options.env.end());
  children_.push_back(std::make_unique<Child>(argv, env));
  Child* child = children_.back().get();
  tenant_of_[child->pid()] = tenant;
  return child;
}

Child* Gpu::StartReady(const std::string& tenant, std::vector<std::string> workload_args, const StartOptions& options,
                       int timeout_ms) {
  workload_args.push_back("--ready-line");
  Child* child = Start(tenant, workload_args, options);
  return child->WaitForOutput("\"event\":\"ready\"", timeout_ms) ? child : nullptr;
}

Json Gpu::RunToEnd(const std::string& tenant, const std::vector<std::string>& workload_args,
                   const StartOptions& options, int timeout_ms) {
  Child* child = Start(tenant, workload_args, options);
  if (child->Wait(timeout_ms) != 0) return Json();
  return child->Result();
}

bool Gpu::SetPolicy(broker::SharingMode mode, uint64_t quantum_ns, std::string* error, uint64_t budget_ns) {
  simquery::Snapshot snap;
  if (!simquery::TakeSnapshot(sim_state_, &snap, error)) {
    // No device yet: any process creates it.
    Child create({paths_.bin_dir + "/gpuslice-workload", "memory", "--chunk", "1Mi"},
                 {"LD_LIBRARY_PATH=" + paths_.sim_lib_dir, "GPUSLICE_SIM_STATE=" + sim_state_});
    create.Wait();
    if (!simquery::TakeSnapshot(sim_state_, &snap, error)) return false;
  }
  if (snap.devices.empty()) {
    *error = "no simulated device";
    return false;
  }
  uint8_t uuid[16];
  if (!broker::ParseUuid(snap.devices[0].uuid, uuid)) {
    *error = "cannot parse " + snap.devices[0].uuid;
    return false;
  }
  auto attached = broker::Broker::Attach(state_dir_);
  if (!attached.ok()) {
    *error = attached.message();
    return false;
  }
  const std::unique_ptr<broker::Broker> broker = std::move(attached).value();
  const auto set = [&] {
    Status changed = broker::SetGpuPolicy(broker->segment(), uuid, mode, quantum_ns);
    if (changed.ok()) changed = broker::SetGpuBudget(broker->segment(), uuid, budget_ns);
    return changed;
  };
  if (set().ok()) return true;
  // The GPU is not in the broker yet: a managed process that allocates introduces it.
  Child introduce({paths_.bin_dir + "/gpuslice-workload", "memory", "--chunk", "1Mi"},
                  {"LD_LIBRARY_PATH=" + paths_.sim_lib_dir, "GPUSLICE_SIM_STATE=" + sim_state_,
                   "LD_PRELOAD=" + paths_.shim_path, "GPUSLICE_STATE_DIR=" + state_dir_,
                   "GPUSLICE_TENANT=gpuslice-policy"});
  if (introduce.Wait() != 0) {
    *error = "introducing the GPU to the broker failed: " + introduce.Stderr();
    return false;
  }
  if (const Status changed = set(); !changed.ok()) {
    *error = changed.message();
    return false;
  }
  return true;
}

Sample Gpu::Take(int ordinal) const {
  Sample sample;
  simquery::Snapshot snap;
  std::string error;
  sample.t_ns = NowNs();
  if (!simquery::TakeSnapshot(sim_state_, &snap, &error) || ordinal < 0 ||
      snap.devices.size() <= static_cast<size_t>(ordinal))
    return sample;
  sample.t_ns = snap.taken_ns;
  const auto& device = snap.devices[static_cast<size_t>(ordinal)];
  sample.device_busy_ns = device.busy_ns;
  sample.handovers = device.handovers;
  for (const auto& p : device.processes) {
    if (p.slot == device.running_slot) sample.running_pid = p.pid;
    const auto it = tenant_of_.find(p.pid);
    if (it == tenant_of_.end()) continue;
    sample.by_pid[p.pid] = ProcessFigures{it->second, p.busy_ns, p.kernels, p.live};
    sample.busy_by_tenant[it->second] += p.busy_ns;
  }
  return sample;
}

void Gpu::StopAll(int timeout_ms) {
  for (auto& child : children_)
    if (child->running()) child->Kill(SIGTERM);
  for (auto& child : children_)
    if (child->running()) child->Wait(timeout_ms);
}

}  // namespace gpuslice::fairness
