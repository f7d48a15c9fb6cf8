#include "workload/command_line.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "common/quantity.h"
#include "common/version.h"
#include "workload/exit_codes.h"

namespace gpuslice::workload {
namespace {

constexpr uint64_t kMaxKernelUs = 60'000'000;  // one minute: a kernel longer than that is a typo

void AddCommonOptions(CLI::App* kind, CommonOptions* o) {
  kind->add_option("--device", o->device, "Device ordinal")->capture_default_str()->check(CLI::NonNegativeNumber);
  kind->add_option("--label", o->label, "Text echoed as \"label\" in every output line");
  kind->add_flag("--ready-line", o->ready_line, "Print {\"event\":\"ready\"} once the context exists");
  kind->add_option("--report-interval", o->report_interval_s, "Seconds between progress lines (0: none)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
}

// Accepts "256Mi", "1Gi", "4G", "1048576" and hands the option the number of bytes.
const CLI::Validator kByteQuantity(
    [](std::string& text) -> std::string {
      const auto bytes = ParseByteQuantity(text);
      if (!bytes || *bytes == 0) return "expected a byte quantity such as 256Mi, 1Gi or 1048576, got '" + text + "'";
      text = std::to_string(*bytes);
      return {};
    },
    "QUANTITY");

void AddWidthOption(CLI::App* kind, std::string* width_name) {
  const std::vector<std::string> names(std::begin(kKernelWidthNames), std::end(kKernelWidthNames));
  kind->add_option("--width", *width_name,
                   "Kernel grid: narrow (one block) or wide (fills every SM: SMs x resident blocks per SM)")
      ->capture_default_str()
      ->check(CLI::IsMember(names));
}

// "20" or "20-50": microseconds, MIN <= MAX, each within [1, kMaxKernelUs].
bool ParseKernelRange(const std::string& text, uint64_t* min, uint64_t* max) {
  const auto number = [](const std::string& s, uint64_t* out) {
    if (s.empty() || s.size() > 9 || s.find_first_not_of("0123456789") != std::string::npos) return false;
    *out = std::stoull(s);
    return *out >= 1 && *out <= kMaxKernelUs;
  };
  const size_t dash = text.find('-');
  if (dash == std::string::npos) return number(text, min) && number(text, max);
  return number(text.substr(0, dash), min) && number(text.substr(dash + 1), max) && *min <= *max;
}

KernelWidth WidthNamed(const std::string& name) {
  return name == kKernelWidthNames[1] ? KernelWidth::kWide : KernelWidth::kNarrow;
}

}  // namespace

std::optional<int> ParseCommandLine(int argc, char** argv, Invocation* out) {
  CLI::App app(
      "Driver-API workloads for gpuslice: compute throughput, request latency, launch-bound steps, memory allocation.",
      "gpuslice-workload");
  app.require_subcommand(1);
  app.set_version_flag("--version", "gpuslice-workload " GPUSLICE_VERSION, "Print the version and exit");

  CommonOptions& common = out->common;
  ComputeOptions& compute = out->compute;
  LatencyOptions& latency = out->latency;
  MemoryOptions& memory = out->memory;

  CLI::App* compute_cmd = app.add_subcommand("compute", "Back-to-back spin kernels: throughput and busy fraction");
  AddCommonOptions(compute_cmd, &common);
  compute_cmd->add_option("--kernel-us", compute.kernel_us, "Length of each kernel in microseconds")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{1}, kMaxKernelUs));
  compute_cmd->add_option("--depth", compute.depth, "Kernels kept in flight")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  std::string compute_width = kKernelWidthNames[0];
  AddWidthOption(compute_cmd, &compute_width);
  uint64_t kernels = 0;
  auto* compute_duration = compute_cmd->add_option("--duration", compute.duration_s, "Seconds to run")
                               ->capture_default_str()
                               ->check(CLI::PositiveNumber);
  auto* compute_kernels = compute_cmd->add_option("--kernels", kernels, "Stop after this many kernels instead")
                              ->check(CLI::Range(uint64_t{1}, std::numeric_limits<uint64_t>::max()));
  compute_duration->excludes(compute_kernels);
  compute_cmd
      ->add_option("--fault-after", compute.fault_after_s,
                   "Seconds after the start at which to launch a kernel that faults (illegal address): "
                   "the context breaks and the run ends with exit 1")
      ->check(CLI::NonNegativeNumber);
  compute_cmd
      ->add_option("--exit-after", compute.exit_after_s,
                   "Seconds after the start at which the main thread calls exit(0) while the kernels are "
                   "launched from another thread (which may be waiting for the GPU): no result line")
      ->check(CLI::PositiveNumber);
  compute_cmd
      ->add_option("--threads", compute.threads,
                   "Launching threads, each on a stream of its own with --depth kernels queued; --kernels "
                   "counts per thread")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  compute_cmd
      ->add_option("--first-on-device", compute.first_on_device,
                   "Before the run, launch one kernel on this device and wait for it; the run then "
                   "uses --device (one process on two GPUs)")
      ->check(CLI::NonNegativeNumber);

  CLI::App* latency_cmd = app.add_subcommand("latency", "Periodic requests of short kernels: latency percentiles");
  AddCommonOptions(latency_cmd, &common);
  latency_cmd->add_option("--period-ms", latency.period_ms, "Milliseconds between request starts")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  latency_cmd->add_option("--kernels-per-request", latency.kernels_per_request, "Kernels in each request")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  CLI::Option* dependent =
      latency_cmd->add_flag("--dependent", latency.dependent,
                            "Wait for each kernel of a request before launching the next (launch, wait, launch: "
                            "a decode loop), instead of launching them all and waiting once");
  latency_cmd
      ->add_option("--host-gap-us", latency.host_gap_us,
                   "With --dependent: microseconds the host spends between a kernel's end and the next launch "
                   "(sampling a token, say), asleep")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{0}, uint64_t{1'000'000}))
      ->needs(dependent);  // without it there is no gap to lengthen: refused rather than ignored
  latency_cmd->add_option("--kernel-us", latency.kernel_us, "Length of each kernel in microseconds")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{1}, kMaxKernelUs));
  std::string latency_width = kKernelWidthNames[0];
  AddWidthOption(latency_cmd, &latency_width);
  uint64_t requests = 0;
  auto* latency_duration = latency_cmd->add_option("--duration", latency.duration_s, "Seconds to run")
                               ->capture_default_str()
                               ->check(CLI::PositiveNumber);
  auto* latency_requests = latency_cmd->add_option("--requests", requests, "Stop after this many requests instead")
                               ->check(CLI::Range(uint64_t{1}, std::numeric_limits<uint64_t>::max()));
  latency_duration->excludes(latency_requests);
  latency_cmd
      ->add_option("--warmup-s", latency.warmup_s,
                   "Seconds first whose requests run but are not recorded (their worst is the result's "
                   "warmup_max_us); --duration and --requests count after it")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 3600.0));
  latency_cmd->add_option("--latencies-file", latency.latencies_file,
                          "Also write every recorded request latency (us, one a line) to this file");

  StepsOptions& steps = out->steps;
  CLI::App* steps_cmd = app.add_subcommand(
      "steps", "Steps of short kernels then a synchronisation (an LLM decode step): steps and launches per second");
  AddCommonOptions(steps_cmd, &common);
  steps_cmd->add_option("--kernels-per-step", steps.kernels_per_step, "Kernels launched in each step")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  std::string kernel_range = "20";
  steps_cmd
      ->add_option("--kernel-us", kernel_range,
                   "Length of each kernel in microseconds, or a range MIN-MAX from which each kernel's length "
                   "is drawn once per run")
      ->capture_default_str();
  steps_cmd->add_flag("--graph", steps.graph,
                      "Capture the step once into a CUDA graph and launch it as one graph per step");
  steps_cmd->add_option("--period-ms", steps.period_ms, "Milliseconds between step starts (0: back to back)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  uint64_t step_count = 0;
  auto* steps_duration = steps_cmd->add_option("--duration", steps.duration_s, "Seconds to run")
                             ->capture_default_str()
                             ->check(CLI::PositiveNumber);
  auto* steps_limit = steps_cmd->add_option("--steps", step_count, "Stop after this many steps instead")
                          ->check(CLI::Range(uint64_t{1}, std::numeric_limits<uint64_t>::max()));
  steps_duration->excludes(steps_limit);
  steps_cmd->add_option("--seed", steps.seed, "Seed of the kernel lengths' draw")->capture_default_str();
  steps_cmd->add_option("--latencies-file", steps.latencies_file,
                        "Also write every step's latency (us, one a line) to this file");

  CLI::App* memory_cmd = app.add_subcommand("memory", "Allocations through one API: obtained versus refused");
  AddCommonOptions(memory_cmd, &common);
  const std::vector<std::string> api_names(std::begin(kMemoryApiNames), std::end(kMemoryApiNames));
  std::string api_name = MemoryApiName(memory.api);
  memory_cmd->add_option("--api", api_name, "Allocation API")->capture_default_str()->check(CLI::IsMember(api_names));
  memory_cmd->add_option("--chunk", memory.chunk_bytes, "Size of each allocation (256Mi, 1Gi, bytes)")
      ->transform(kByteQuantity)
      ->default_str("64Mi");
  memory_cmd->add_option("--count", memory.count, "Number of allocations")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 20));
  memory_cmd->add_option("--hold", memory.hold_s, "Seconds to hold the memory before freeing it")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  memory_cmd->add_flag("--touch", memory.touch, "Write every allocated byte");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? kExitOk : kExitUsage;  // --help exits 0
  }
  compute.width = WidthNamed(compute_width);
  latency.width = WidthNamed(latency_width);
  if (compute_kernels->count() > 0) compute.kernels = kernels;
  if (latency_requests->count() > 0) latency.requests = requests;
  if (steps_limit->count() > 0) steps.steps = step_count;
  if (steps_cmd->parsed() && !ParseKernelRange(kernel_range, &steps.kernel_us_min, &steps.kernel_us_max)) {
    std::fprintf(stderr,
                 "--kernel-us: expected microseconds (20) or a range MIN-MAX (20-50) between 1 and %llu, got '%s'\n",
                 static_cast<unsigned long long>(kMaxKernelUs), kernel_range.c_str());
    return kExitUsage;
  }
  memory.api = static_cast<MemoryApi>(std::find(api_names.begin(), api_names.end(), api_name) - api_names.begin());

  if (memory.api == MemoryApi::kArray && memory.touch) {
    std::fprintf(stderr, "--touch: arrays are not linear memory and cannot be memset; drop --touch for --api array\n");
    return kExitUsage;
  }

  out->kind = compute_cmd->parsed()   ? Kind::kCompute
              : latency_cmd->parsed() ? Kind::kLatency
              : steps_cmd->parsed()   ? Kind::kSteps
                                      : Kind::kMemory;
  return std::nullopt;
}

}  // namespace gpuslice::workload
