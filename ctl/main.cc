// gpuslicectl: the operators' view of gpuslice on a node. It reads the broker's shared segment
// (it never changes a quota or a charge, beyond returning a dead process's charges as any tenant
// would) and prints the shim's configuration reference. Errors: one line on stderr; exit codes
// in exit_codes.h.
#include <CLI/CLI.hpp>

#include "ctl/exit_codes.h"
#include "ctl/options_command.h"
#include "ctl/status_command.h"

namespace {

constexpr char kStatusHelp[] = R"(Columns, per GPU (identified by its UUID, with its total memory):
  TENANT / PID  a tenant (GPUSLICE_TENANT; a process without one is a tenant of its own,
                named proc-<random hex>), then indented each of its live processes
                ("pid N": the pid as the process saw itself, so it may be the pid inside
                its container's PID namespace)
  USED          GPU memory the tenant has allocated through gpuslice on this GPU; for a
                process, the part it holds itself
  QUOTA         the tenant's limit on this GPU (GPUSLICE_MEMORY_LIMIT), or "unlimited"
  % QUOTA       USED as a share of QUOTA ("-" when unlimited)
Each GPU ends with the quota committed: the sum of the tenants' quotas against the device's
memory. Idle tenants (no live process, nothing used) are listed but not counted: they promise
nothing, and the broker reuses their entries when its table fills. OVERSUBSCRIBED means the
quotas cannot all be honoured at once (they add up to more than the device, or a tenant without
a quota shares it), so a tenant may run out of memory below its quota while others are busy.
Processes that died are reaped first and their memory returned to their tenant (when the
state file is writable for you; otherwise the figures are shown as they stand).
Exit status: 0, 1 when the state cannot be read (missing, incompatible or corrupt), 2 on
usage errors.)";

constexpr char kOptionsHelp[] =
    "Lists every GPUSLICE_* variable the shim (libgpuslice.so) reads in a tenant's process: its\n"
    "name, type, default, an example and what it means. The shim reads them once, at the process's\n"
    "first CUDA call, and reports a bad value or an unknown GPUSLICE_* variable in one line naming\n"
    "it. (GPUSLICE_SIM_* variables belong to the simulated driver: see docs/simulator.md.)\n"
    "--markdown prints the table README.md's \"Environment reference\" contains.";

}  // namespace

int main(int argc, char** argv) {
  using namespace gpuslice::ctl;
  CLI::App app("Operators' view of gpuslice on this node: tenants' GPU memory, quotas and processes.",
               "gpuslicectl");
  app.require_subcommand(1);

  StatusOptions status;
  CLI::App* status_cmd =
      app.add_subcommand("status", "Per GPU: each tenant's memory used and quota, and its processes");
  status_cmd->add_flag("--json", status.json, "Print one JSON object (bytes as integers, null for no quota)");
  status_cmd->add_option("--state-dir", status.state_dir,
                         "State directory (default: $GPUSLICE_STATE_DIR, else /run/gpuslice)")
      ->type_name("DIR");
  status_cmd->footer(kStatusHelp);

  bool markdown = false;
  CLI::App* options_cmd = app.add_subcommand("options", "The shim's environment variables: type, default, meaning");
  options_cmd->add_flag("--markdown", markdown, "Print the Markdown table of README.md's environment reference");
  options_cmd->footer(kOptionsHelp);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? kExitOk : kExitUsage;  // --help exits 0
  }
  if (status_cmd->parsed()) return RunStatus(status);
  return RunOptions(markdown);
}
