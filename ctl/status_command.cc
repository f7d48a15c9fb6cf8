#include "ctl/status_command.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string_view>

#include <fmt/format.h>

#include "broker/access_advice.h"
#include "broker/segment_layout.h"
#include "broker/snapshot.h"
#include "common/exit_codes.h"
#include "ctl/mig_topology.h"
#include "ctl/status_device.h"
#include "ctl/status_enforcement.h"
#include "ctl/status_json.h"
#include "ctl/status_report.h"
#include "ctl/status_table.h"

namespace gpuslice::ctl {
namespace {

int Fail(const std::string& message) {
  std::fprintf(stderr, "gpuslicectl: %s\n", message.c_str());
  return kExitFailure;
}

}  // namespace

// The two ordinary reasons for having nothing to show get their own words; anything else about
// the directory or the file is the broker's to judge (it knows what a compatible segment is).
std::optional<std::string> ExplainAbsence(const std::string& dir) {
  struct stat info {};
  if (stat(dir.c_str(), &info) != 0) {
    if (errno == ENOENT)
      return fmt::format(
          "state directory {} does not exist (tenants use GPUSLICE_STATE_DIR, default "
          "/run/gpuslice; point --state-dir at the directory they use)",
          dir);
    if (errno == EACCES)
      return fmt::format("cannot read state directory {}: {}", dir, broker::AccessAdvice(dir, false));
    return fmt::format("cannot read state directory {}: {}", dir, std::strerror(errno));
  }
  if (!S_ISDIR(info.st_mode)) return fmt::format("state directory {} is not a directory", dir);
  const std::string file = dir + "/" + broker::kStateFileName;
  if (stat(file.c_str(), &info) != 0 && errno == ENOENT)
    return fmt::format("no gpuslice tenant has run on this node yet ({} does not exist)", file);
  return std::nullopt;
}

std::string WithoutBrokerPrefix(std::string error) {
  // The broker speaks as "gpuslice: ..." (it also talks inside tenants' processes).
  constexpr std::string_view kBrokerPrefix = "gpuslice: ";
  if (error.starts_with(kBrokerPrefix)) error.erase(0, kBrokerPrefix.size());
  return error;
}

std::string DefaultStateDir() {
  const char* env = std::getenv("GPUSLICE_STATE_DIR");
  return env && *env ? env : "/run/gpuslice";
}

int RunStatus(const StatusOptions& options) {
  const std::string dir = options.state_dir.empty() ? DefaultStateDir() : options.state_dir;
  if (const auto why = ExplainAbsence(dir)) return Fail(*why);

  Result<broker::Snapshot> taken = broker::TakeSnapshot(dir);
  if (!taken.ok()) return Fail(WithoutBrokerPrefix(taken.message()));
  broker::Snapshot snapshot = std::move(taken).value();
  SortForDisplay(&snapshot);

  // replace: the broker stores tenant names as bytes, and one that is not UTF-8 must not make the
  // JSON throw.
  // MIG instances under their GPU when NVML is there to say which GPU that is.
  const MigTopology mig = ReadMigTopology();
  // The device's own figures beside the broker's (unaccounted memory), when NVML is there, and
  // each Kubernetes tenant's pod.
  const DeviceFiguresByUuid devices = ReadDeviceFigures();
  // A pods file that is not the plugin's is said, once, and names no pod: the status still shows.
  const PodNamesRead pods_read = ReadPodNames(options.pods_file.empty() ? kDefaultPodsFile : options.pods_file);
  if (!pods_read.problem.empty()) std::fprintf(stderr, "gpuslicectl: %s\n", pods_read.problem.c_str());
  const PodNames& pods = pods_read.names;
  // How each GPU's memory is enforced: the preload alone, or the driver's limits beneath it.
  const EnforcementByGpu enforcement = ReadMemoryEnforcement(snapshot, dir, mig);
  const std::string text = options.json
                               ? StatusJson(snapshot, mig, devices, pods, enforcement)
                                         .dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) +
                                     "\n"
                               : RenderStatusTable(snapshot, mig, devices, pods, enforcement);
  // A closed or full stdout must not look like success to a script.
  if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size() || std::fflush(stdout) != 0)
    return Fail(fmt::format("writing the status: {}", std::strerror(errno)));
  return kExitOk;
}

}  // namespace gpuslice::ctl
