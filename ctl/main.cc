// gpuslicectl: the operators' view of gpuslice on a node. It reads the broker's shared segment
// (it never changes a quota or a charge, beyond returning a dead process's charges as any tenant
// would), sets each GPU's compute policy (sharing mode and quantum), and prints the shim's
// configuration reference. Errors: one line on stderr; exit codes in common/exit_codes.h.
#include <CLI/CLI.hpp>

#include "common/exit_codes.h"
#include "common/version.h"
#include "ctl/options_command.h"
#include "ctl/plan_command.h"
#include "ctl/set_command.h"
#include "ctl/status_command.h"
#include "ctl/subcommand_hint.h"
#include "ctl/top_command.h"

namespace {

constexpr char kStatusHelp[] =
    R"help(Per GPU (identified by its UUID, with its total memory; a MIG instance by its profile and
MIG-UUID, indented under a line for its GPU, when NVML says which GPU it belongs to), first its
compute policy:
  compute: MODE, quantum Q, budget B
                             the sharing mode, quantum and queued-work budget (gpuslicectl
                             set); "(default)" when none was set (10 ms, 2 ms). In timeslice
                             mode also the tenant holding the GPU now ("draining" while it
                             finishes its kernels to hand over), the processes waiting for
                             it and the grants made
then a row per tenant, with these columns:
  TENANT / PID  a tenant (GPUSLICE_TENANT; a process without one is a tenant of its own,
                named proc-<random hex>), then indented each of its live processes
                ("pid N": the pid as the process saw itself, so it may be the pid inside
                its container's PID namespace)
  USED          GPU memory the tenant has allocated through gpuslice on this GPU; for a
                process, the part it holds itself
  MEM REQ       the memory guaranteed to it on this GPU (GPUSLICE_MEMORY_REQUEST), "-" when none
  QUOTA         the tenant's limit on this GPU (GPUSLICE_MEMORY_LIMIT), or "unlimited"
  % QUOTA       USED as a share of QUOTA ("-" when unlimited)
  BORROWED      what it holds beyond its request: memory no other tenant's request reserves
  REQUEST       the share of the GPU's time the tenant is entitled to when it wants it, and
                its weight among those waiting (GPUSLICE_COMPUTE_REQUEST), set when its
                first process uses the GPU; "-" when it has not (a process of an older
                gpuslice sets it at its first kernel launch)
  LIMIT         the share it may never exceed (GPUSLICE_COMPUTE_LIMIT); "-" likewise
  CLASS         its compute class (GPUSLICE_COMPUTE_CLASS): standard, latency (its launches
                go first while it stays within its request) or background (runs only on
                time no other tenant wants); "-" likewise
  HELD          the time the tenant held the GPU (from each grant until its last process
                went idle, the drain of its kernels at each hand-over included, plus its
                latency-class work) as a share of the last complete window, which runs from
                a hand-over to the first hand-over at least 10 s later and ended when the
                line beneath says. "-" before the first window completes, and in modes
                none and mps, where nothing is measured
With NVML (the driver's libnvidia-ml.so.1), a whole GPU's block begins with the device's own
figures ("device:": its index and name, memory in use and free, how busy it was in NVML's last
sample period (1/6 s to 1 s, the exporter's gpuslice_device_utilization_ratio), compute processes,
managed or not; "device processes:": their pids as the node sees them, names and memory) and
the memory accounted here against them ("accounted here: ... of the ... in use; unaccounted:
..."): memory in use beyond what this state directory's tenants hold. UNACCOUNTED (more than
the 512 MiB per process, at least 1 GiB, taken for driver-internal memory) means another state
directory's tenants or processes not under gpuslice hold it; their quotas are not counted here
(docs/accounting.md, "Unaccounted memory").
Each GPU ends with the quota committed: the sum of the tenants' quotas against the device's
memory, and, where tenants have memory requests, the requests held and what is borrowed. Idle tenants (no live process, nothing used: "no process" beneath them) are listed but
not counted: they promise nothing, and the broker reuses their entries when its table fills.
OVERSUBSCRIBED means the promises cannot all be honoured at once (the requests, and the quotas
of tenants without a request, add up to more than the device, or a tenant without a quota
shares it), so a tenant may run out of memory below its quota while others are busy. A limit
above a request is no promise: beyond its request a tenant borrows only unreserved memory.
Then the compute requested: the sum of the active tenants' requests. Requests may add up to
more than 100%: the line then says "oversubscribed: requests are shared in proportion", and
tenants that all want the GPU get it in proportion to their requests (60% and 90% get 40% and
60%) rather than what each asked for; each still stays within its limit.
Beneath a tenant, "request held by gpuslice-dra-driver" (or -device-plugin) says the node holds
its request before and between its processes, and "driver-enforced: hard ..., soft ..." that the
driver's own per-cgroup limits hold its containers (as the driver reports them now). A GPU's
"memory:" line says how its memory is enforced: by the preload only (a driver without per-cgroup
memory limits, before r615: a process without the preload is not limited), by the preload and
the driver's hard limits, or, on a MIG instance, by the preload within the instance
(docs/accounting.md, "Three levels of enforcement").
A Kubernetes tenant's pod ("pod NAMESPACE/POD/CONTAINER" beneath it) comes from the device
plugin's pods file (--pods-file); one that is not as the plugin writes it (a link, a FIFO,
another owner, writable by others, over 1 MiB) names no pod and is said in one line on stderr.
Processes that died are reaped first and their memory returned to their tenant (when the
state file is writable for you; otherwise the figures are shown as they stand).
--json prints the same (keys documented in ctl/status_json.h): per GPU mig (the instance's uuid,
profile, gpu_index, gpu_uuid; null for a whole GPU), device (NVML's figures; null without them),
accounted_bytes, unaccounted_bytes, unaccounted_held_elsewhere, mode, quantum_ns,
quantum_default, budget_ns, budget_default, holder, grants, grant_time_ns (nanoseconds since the GPU
entry was created: grant_start_idle, holder_idle, drain, unheld_waiting), compute_requested_percent,
compute_oversubscribed; per tenant compute_request_percent, compute_limit_percent,
compute_class, last_window_share_percent (null for "-"), grants_received, waits,
wait_seconds_total, refused_allocations.
Exit status: 0, 1 when the state cannot be read (missing, incompatible or corrupt), 2 on
usage errors.)help";

constexpr char kSetHelp[] =
    R"help(Sets the compute policy of one GPU, or of every GPU in the broker, for every tenant on the
node at once: running processes pick it up at their next launch or quantum; nothing restarts.
Unspecified settings keep their value. Examples:
  gpuslicectl set --gpu all --quantum 20ms
  gpuslicectl set --gpu GPU-5b1c36a2-0f4d-5e8a-9c71-2a3b4c5d6e7f --mode none
  gpuslicectl set --gpu all --quantum default --mode timeslice
  gpuslicectl set --gpu all --budget 1ms
Modes:
  timeslice  gpuslice grants the GPU to one tenant at a time, for a quantum, by weighted fair
             queuing on the tenants' requests and within their limits (the default)
  none       memory quotas only: launches are not gated, tenants share the GPU as the driver
             schedules them
  mps        launches are not gated: an MPS server (the operator starts it) shares the SMs;
             processes started after the switch pass their limit to MPS
             (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE) and their memory limit in bytes
             (CUDA_MPS_PINNED_DEVICE_MEM_LIMIT)
Quantum: how long a tenant holds the GPU while others wait, 1ms to 1s, written as a number
and a unit (ns, us, ms, s): 10ms, 0.05s, 2500us, 2.5ms; "default" returns to the built-in
10ms. Longer quanta cost less in hand-overs (each waits for the holder's kernels to finish)
and add latency for the others; a kernel longer than the quantum still runs to its end.
Budget: while other tenants share the GPU, how much work (by the measured kernel length) the
holder may keep queued, 100us to 100ms, or "default" (2ms); at least two kernels (one for a
limited tenant) always go through. At the end of a quantum the grant moves once the holder's
last kernel runs, so the budget bounds how long a waiting tenant waits once the holder's grant
ends; a waiter owed the GPU gets it at once, beside what the holder has queued.
A GPU appears in the broker once a tenant has used it; `gpuslicectl status` lists them.
Prints one line per GPU: "GPU <uuid>: mode OLD -> NEW, quantum OLD -> NEW, budget OLD -> NEW"
("(unchanged)" for a setting that kept its value).
Exit status: 0; 1 when the state cannot be changed (missing, incompatible, not writable for
you, or no such GPU); 2 on usage errors (no --gpu, nothing to set, an unknown mode, a quantum
or budget that is not a duration or out of range, a malformed UUID).)help";

constexpr char kOptionsHelp[] =
    "Lists every GPUSLICE_* variable the shim (libgpuslice.so) reads in a tenant's process: its\n"
    "name, type, default, an example and what it means. The shim reads them once, at the process's\n"
    "first CUDA call, and reports a bad value or an unknown GPUSLICE_* variable in one line naming\n"
    "it (GPU_SLICE_* and either in another case count as misspelt GPUSLICE_* names: refused, with\n"
    "the variable they likely meant). (GPUSLICE_SIM_* variables belong to the simulated driver:\n"
    "see docs/simulator.md.)\n"
    "--markdown prints the table docs/configuration.md's \"Environment reference\" contains.";

constexpr char kTopHelp[] = R"help(The status as a view that redraws itself; --once prints one frame of every tenant
and exits, for scripts. Per GPU its UUID, memory, sharing mode, how busy it was in NVML's last
sample period (1/6 s to 1 s: the same figure as status and the exporter), the tenant holding it,
the processes waiting and the grants made, then a row per tenant (idle tenants are counted, not
listed). It fits the terminal: under 120 columns the rows are compact (80 columns, no bar, no
BORROWED, REFUSED as REF and PROCS as PRC); nothing is cut to fit: a GPU's header goes on over lines, and
a tenant name longer than its column has a line of its own above its figures. When the tenants
do not fit its height they are paged, each page under its GPU's header and the column headings. Keys: s cycles the sort (name, memory,
held time, waits), n or space the next page, p the previous, q quits (as Ctrl-C does).
  TENANT      the tenant (GPUSLICE_TENANT), whole
  CLASS       its compute class; "-" until its first process uses the GPU
  MEMORY      a bar of USED against QUOTA (against the device's memory when unlimited)
  BORROWED    what it holds beyond its memory request (GPUSLICE_MEMORY_REQUEST): memory no
              other tenant's request reserves; "-" when nothing
  REQ         its compute request (GPUSLICE_COMPUTE_REQUEST)
  HELD        the share of the GPU's time it held since the last frame; with --once, that of
              the last complete window as in gpuslicectl status ("-" before one completes)
  WAIT P99    the 99th percentile of its waits for the grant, as the bound of the broker's
              histogram bucket that holds it ("<= 5 ms"; buckets from 50 us to 10 s in steps
              of 1, 2.5, 5); "-" before its first wait
  REFUSED     allocations refused over its quota since its ledger was created
  PROCS       its live processes on the GPU
Dead processes are reaped first, as for status. The same figures, for Prometheus:
gpuslice-exporter (docs/observability.md).
Exit status: 0; 1 when the state cannot be read (--once); 2 on usage errors.)help";

constexpr char kPlanHelp[] = R"help(Lays tenants out on GPUs: MIG instances where isolation is required, soft slices
(gpuslice) of a whole GPU or of an instance for the rest, MPS where trusted tenants need their
kernels to run concurrently; with the reason for each choice, what is left unused, the exact
GPUSLICE_* variables and the Kubernetes resources to request. Examples:
  gpuslicectl plan --model h200 tenants.yaml             # on the fewest H200s that hold them
  gpuslicectl plan --model A100-80GB --gpus 4 --json tenants.json
  gpuslicectl plan --gpu 0 tenants.yaml      # the model and memory of GPU 0, read through NVML
The file (YAML or JSON) holds `tenants:`, a list of:
  name            its GPUSLICE_TENANT (1 to 63 of A-Z a-z 0-9 . _ -), required
  memory          GPU memory it needs: 20Gi, 512Mi (binary), 20G (decimal: 20 x 10^9), bytes; required.
                  The plan packs it and guarantees it (GPUSLICE_MEMORY_REQUEST)
  memory_limit    what it may borrow up to beyond that, of memory nobody's request reserves
                  (GPUSLICE_MEMORY_LIMIT); at least memory; default: memory
  compute         the share of one whole GPU's compute (its SMs) it needs, 1 to 100; required
  latency_ms      the p99 latency its GPU work must meet; optional
  trusted         true: it keeps the preload and behaves (default false: may be hostile)
  fault_tolerant  true: another tenant's GPU fault may break it too (default false)
  tier            tenants of different tiers never share a GPU (default "default")
The rules: untrusted or fault-intolerant -> a MIG instance of its own (hardware isolation);
trusted and fault-tolerant with latency_ms below 20 -> an MPS client (no waiting for turns),
or an instance of its own on a GPU partitioned anyway; every other tenant -> a soft slice (its
quota and share of time, idle time lent), compute class latency when it has a latency target.
A MIG instance is the smallest profile with the tenant's memory and share of SMs; first fit,
isolated tenants first. docs/choosing.md explains the trade-offs and the figures behind them.
Without --gpus, --model plans on the fewest GPUs of the model that hold every tenant.
--json prints one object: gpus (index, name, uuid, model, memory_bytes, tier, mode mig |
timeslice | mps, mig_layout as GPUSLICE_SIM_MIG takes it, setup commands, units: profile,
start, memory_bytes, sm_percent, shared, tenants, memory_unused_bytes, compute_unused_percent;
outside_instances for MIG), tenants (name, tier, placement mig-instance | soft-slice |
mps-client, gpu, unit, compute_request_percent, env, reason, kubernetes: resources, note),
unused_gpus and fewest_gpus (true when --gpus was left out).
Exit status: 0 with a plan; 1 when NVML cannot be read (--gpu); 2 on usage errors and a bad
tenants file; 3 when the request cannot be met (more memory than a GPU, isolation without a
MIG-capable GPU, more than the largest instance, more GPUs or instances than given): one line
on stderr saying why, never a plan that does not hold.)help";

}  // namespace

int main(int argc, char** argv) {
  using namespace gpuslice::ctl;
  using gpuslice::kExitOk;
  using gpuslice::kExitUsage;
  CLI::App app(
      "Operators' view of gpuslice on this node: tenants' GPU memory, quotas, compute shares and\n"
      "processes (status, top), each GPU's compute policy (set), the shim's variables (options), and\n"
      "a layout of tenants on GPUs: MIG, soft slices, MPS (plan).",
      "gpuslicectl");
  app.require_subcommand(1);
  app.set_version_flag("--version", "gpuslicectl " GPUSLICE_VERSION, "Print the version and exit");

  StatusOptions status;
  CLI::App* status_cmd =
      app.add_subcommand("status",
                         "Per GPU: compute policy and holder; per tenant: memory used / quota, compute "
                         "request / limit / measured share, processes");
  status_cmd->add_flag("--json", status.json, "Print one JSON object (bytes as integers, null for no quota)");
  status_cmd
      ->add_option("--state-dir", status.state_dir,
                   "State directory (default: $GPUSLICE_STATE_DIR, else /run/gpuslice)")
      ->type_name("DIR");
  status_cmd
      ->add_option("--pods-file", status.pods_file,
                   "The device plugin's map of tenants to pods (default /run/gpuslice-pods/pods.json)")
      ->type_name("FILE");
  status_cmd->footer(kStatusHelp);

  SetOptions set;
  std::string set_gpu, set_quantum, set_mode, set_budget;
  CLI::App* set_cmd =
      app.add_subcommand("set", "Change a GPU's compute policy: sharing mode, quantum and queued-work budget");
  CLI::Option* gpu_opt =
      set_cmd->add_option("--gpu", set_gpu, "The GPU: its UUID as gpuslicectl status prints it, or all")
          ->type_name("UUID|all");
  CLI::Option* quantum_opt =
      set_cmd->add_option("--quantum", set_quantum, "Time slice: 1ms to 1s (10ms, 2500us, 0.05s), or default (10ms)")
          ->type_name("DURATION");
  CLI::Option* mode_opt =
      set_cmd->add_option("--mode", set_mode, "timeslice (default), none (memory quotas only) or mps")
          ->type_name("MODE");
  CLI::Option* budget_opt =
      set_cmd
          ->add_option("--budget", set_budget,
                       "Work a holder may keep queued while others share the GPU: 100us to 100ms, or default (2ms)")
          ->type_name("DURATION");
  set_cmd
      ->add_option("--state-dir", set.state_dir, "State directory (default: $GPUSLICE_STATE_DIR, else /run/gpuslice)")
      ->type_name("DIR");
  set_cmd->footer(kSetHelp);

  TopOptions top;
  CLI::App* top_cmd = app.add_subcommand(
      "top", "A refreshing view per GPU: tenants' memory against quota, share against request, wait p99, refusals");
  top_cmd->add_flag("--once", top.once, "Print one frame and exit");
  top_cmd->add_option("--interval", top.interval_s, "Seconds between frames, 0.1 to 60")
      ->type_name("SECONDS")
      ->check(CLI::Range(0.1, 60.0))
      ->capture_default_str();
  top_cmd
      ->add_option("--state-dir", top.state_dir, "State directory (default: $GPUSLICE_STATE_DIR, else /run/gpuslice)")
      ->type_name("DIR");
  top_cmd
      ->add_option("--sort", top.sort, "Order of the tenants under each GPU: memory, share, waits or name (s cycles)")
      ->type_name("KEY")
      ->check(CLI::IsMember({"memory", "share", "waits", "name"}))
      ->capture_default_str();
  top_cmd->footer(kTopHelp);

  bool markdown = false;
  CLI::App* options_cmd = app.add_subcommand("options", "The shim's environment variables: type, default, meaning");
  options_cmd->add_flag("--markdown", markdown,
                        "Print the Markdown table of docs/configuration.md's environment reference");
  options_cmd->footer(kOptionsHelp);

  PlanOptions plan;
  CLI::App* plan_cmd = app.add_subcommand(
      "plan",
      "Lay tenants out on GPUs: MIG instances, soft slices, MPS; the reasons, GPUSLICE_* variables and "
      "Kubernetes resources");
  plan_cmd->add_option("tenants", plan.tenants_file, "The tenants: a YAML or JSON file")->required()->type_name("FILE");
  plan_cmd
      ->add_option("--model", plan.model,
                   "The GPU model: H200, H100-80GB, A100-80GB or A100-40GB (as GPUSLICE_SIM_MODEL; any case, short "
                   "forms such as h200, h100 or a100-40 too)")
      ->type_name("MODEL");
  plan_cmd
      ->add_option("--gpus", plan.gpus,
                   "How many GPUs of --model, 1 to 64; left out, the fewest that hold every tenant")
      ->type_name("N");
  plan_cmd->add_option("--gpu", plan.gpu, "Plan for these GPUs of this node instead, read through NVML: 0 or 0,1")
      ->type_name("N[,N...]");
  plan_cmd->add_flag("--json", plan.json, "Print one JSON object");
  plan_cmd->footer(kPlanHelp);

  // CLI11 answers a misspelt subcommand with "A subcommand is required": name it instead.
  if (const auto unknown = UnknownSubcommand(argc, argv, {"status", "set", "options", "top", "plan"})) {
    std::fprintf(stderr, "gpuslicectl: %s\nRun with --help for more information.\n", unknown->c_str());
    return kExitUsage;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? kExitOk : kExitUsage;  // --help exits 0
  }
  if (status_cmd->parsed()) return RunStatus(status);
  if (top_cmd->parsed()) return RunTop(top);
  if (plan_cmd->parsed()) return RunPlan(plan);
  if (set_cmd->parsed()) {
    if (gpu_opt->count() > 0) set.gpu = set_gpu;
    if (quantum_opt->count() > 0) set.quantum = set_quantum;
    if (mode_opt->count() > 0) set.mode = set_mode;
    if (budget_opt->count() > 0) set.budget = set_budget;
    return RunSet(set);
  }
  return RunOptions(markdown);
}
