// gpuslice-driver-limits: the driver's memory limits as a hard backstop under the preload, set on
// each tenant container's cgroup by the container runtime, as an OCI hook (docs/accounting.md,
// "Three levels of enforcement"). A container's cgroup exists only once the runtime created it,
// so the hook runs then: `set` at createRuntime (before any process of the container runs),
// `clear` at poststop. The runtime passes the container's state (JSON: id, pid) on stdin; the
// DRA driver's CDI specs name the hook with the tenant's GPU, request and limit.
//
//   gpuslice-driver-limits set --state-dir DIR --tenant NAME --gpu UUID --request BYTES --limit BYTES
//   gpuslice-driver-limits clear --state-dir DIR
//
// The hook never stops a container from starting: where the driver has no such limits (before
// r615, a MIG instance) or refuses, it says so on stderr and exits 0, and the preload alone
// enforces the tenant's memory, as `gpuslicectl status` then shows. Exit codes: 0 done or
// nothing to do, 2 bad usage (an unreadable container state included).
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <iterator>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "common/version.h"
#include "driverlimits/cgroup_path.h"
#include "driverlimits/driver_memory_limits.h"
#include "driverlimits/limit_records.h"
#include "gpu/nvml_library.h"

namespace gpuslice::driverlimits {
namespace {

constexpr int kExitUsage = 2;
constexpr char kName[] = "gpuslice-driver-limits";

struct ContainerState {
  std::string id;
  int pid = 0;
};

// The OCI runtime's state of the container, from stdin.
Result<ContainerState> ReadContainerState() {
  const std::string text((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
  const nlohmann::json state = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!state.is_object() || !state.contains("id") || !state["id"].is_string())
    return Status::InvalidArgument("the container state on stdin is not the runtime's JSON with an \"id\"");
  ContainerState out;
  out.id = state["id"].get<std::string>();
  if (state.contains("pid") && state["pid"].is_number_integer()) out.pid = state["pid"].get<int>();
  return out;
}

void Say(const std::string& line) { std::fprintf(stderr, "%s: %s\n", kName, line.c_str()); }

int Set(const std::string& state_dir, const std::string& library, LimitRecord record) {
  Result<ContainerState> state = ReadContainerState();
  if (!state.ok()) return Say(state.message()), kExitUsage;
  if (state->pid <= 0) return Say("the container state has no pid: run me as a createRuntime hook"), kExitUsage;
  record.container = state->id;
  const std::string preload_only = "; tenant '" + record.tenant + "' is held to its memory by the preload only";
  Result<std::string> cgroup = CgroupOfProcess(state->pid);
  if (!cgroup.ok()) return Say(cgroup.message() + preload_only), 0;
  record.cgroup = *cgroup;
  Result<std::unique_ptr<DriverMemoryLimits>> driver = DriverMemoryLimits::Open(library);
  if (!driver.ok()) return Say(driver.message() + preload_only), 0;
  switch ((*driver)->SupportOn(record.gpu_uuid)) {
    case DriverSupport::kYes: break;
    case DriverSupport::kMigInstance:
      return Say(record.gpu_uuid + " is a MIG instance, which the driver's memory limits do not cover" + preload_only),
             0;
    case DriverSupport::kNoSupport:
      return Say("the driver of " + record.gpu_uuid + " has no " + kDriverFeature + preload_only), 0;
    case DriverSupport::kUnknownGpu: return Say("NVML does not know " + record.gpu_uuid + preload_only), 0;
  }
  if (Status set = (*driver)->Set(record.gpu_uuid, record.cgroup, record.soft, record.hard); !set.ok())
    return Say(set.message() + preload_only), 0;
  if (Status written = WriteRecord(state_dir, record); !written.ok()) {
    // Unrecorded, the limit would outlive the container unseen: take it back.
    (void)(*driver)->Clear(record.gpu_uuid, record.cgroup);
    return Say(written.message() + preload_only), 0;
  }
  return 0;
}

int Clear(const std::string& state_dir, const std::string& library) {
  Result<ContainerState> state = ReadContainerState();
  if (!state.ok()) return Say(state.message()), kExitUsage;
  const std::vector<LimitRecord> records = RecordsOf(state_dir, state->id);
  if (records.empty()) return 0;
  Result<std::unique_ptr<DriverMemoryLimits>> driver = DriverMemoryLimits::Open(library);
  for (const LimitRecord& record : records) {
    // A cgroup removed with its container has no limits left; whatever the driver says, the
    // record goes, so that status never shows a container that is gone.
    if (driver.ok()) (void)(*driver)->Clear(record.gpu_uuid, record.cgroup);
    if (Status removed = RemoveRecord(state_dir, record); !removed.ok()) Say(removed.message());
  }
  return 0;
}

}  // namespace
}  // namespace gpuslice::driverlimits

int main(int argc, char** argv) {
  using namespace gpuslice::driverlimits;
  CLI::App app{
      "Sets the NVIDIA driver's memory limits on a gpuslice tenant container's cgroup (hard: the tenant's limit, "
      "soft: its request), as an OCI hook of the container runtime; the container's state is read from stdin."};
  app.set_version_flag("--version", std::string(kName) + " " + GPUSLICE_VERSION);
  app.require_subcommand(1);
  std::string state_dir, library = gpuslice::gpu::kNvmlLibrary;
  LimitRecord record;
  CLI::App* set = app.add_subcommand("set", "createRuntime hook: set the container's cgroup limits on --gpu");
  CLI::App* clear = app.add_subcommand("clear", "poststop hook: clear what `set` set for the container");
  for (CLI::App* command : {set, clear}) {
    command->add_option("--state-dir", state_dir, "the host path of the broker's state directory")->required();
    command->add_option("--nvml-library", library, "libnvidia-ml.so.1 (a path or a name)")->capture_default_str();
  }
  set->add_option("--tenant", record.tenant, "the container's gpuslice tenant")->required();
  set->add_option("--gpu", record.gpu_uuid, "the GPU's UUID (GPU-...)")->required();
  set->add_option("--request", record.soft, "the tenant's memory request in bytes: the soft limit")->required();
  set->add_option("--limit", record.hard, "the tenant's memory limit in bytes: the hard limit")->required();
  CLI11_PARSE(app, argc, argv);
  if (set->parsed()) return Set(state_dir, library, record);
  return Clear(state_dir, library);
}
