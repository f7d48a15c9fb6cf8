// The simulated NVML's utilisation queries, derived from samples as the driver's are
// (nvml_samples.h): a device's over the last sampling period, each process's since the sample a
// caller names.
#include "sim/nvml/nvml_library.h"  // first: NVML's declarations as this library exports them

#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

using namespace gpuslice::sim;
using namespace gpuslice::sim::nvml;

namespace {

// nvmlDeviceGetUtilizationRates reports over this period, like the driver's 1/6 s to 1 s sampling
// period (the longer one: fewer quantisation artefacts from whole kernels), and over no less than
// the shorter one for a process younger than the period.
constexpr uint64_t kUtilizationPeriodUs = 1'000'000;
constexpr uint64_t kShortestPeriodUs = 166'667;

}  // namespace

extern "C" {

nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t device, nvmlProcessUtilizationSample_t* utilization,
                                             unsigned int* processSamplesCount,
                                             unsigned long long lastSeenTimeStamp) try {
  GPUSLICE_SIM_ENTRY();
  return WithDevice(device, [&](Session& session, int ordinal) {
    if (processSamplesCount == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (session.InMigMode(ordinal)) return NVML_ERROR_NOT_SUPPORTED;  // as NVML under MIG
    SimState& state = session.state();
    state.ReapDeadProcesses();
    const Clocks clocks = ReadClocks();
    const auto& segment = state.segment();
    const auto& dev = state.device(ordinal);
    DeviceHistory& history = session.history(ordinal);
    history.slots.resize(kMaxProcesses);
    std::vector<nvmlProcessUtilizationSample_t> found;
    for (int s = 0; s < kMaxProcesses; ++s) {
      SlotHistory& slot_history = history.slots[s];
      const auto& slot = segment.slots[s];
      if (static_cast<SlotState>(slot.state.load()) == SlotState::kFree) continue;
      if (slot_history.generation != slot.generation) {  // the slot belongs to another process now
        slot_history.generation = slot.generation;
        slot_history.samples.clear();
      }
      const uint64_t busy = dev.processes[s].busy_ns.load();
      // Registration zeroes the busy time, so the process's start is a sample known exactly.
      const uint64_t started_us = clocks.ToEpochMicros(slot.started_ns);
      const Sample base =
          BaselineAt(slot_history.samples, std::max<uint64_t>(lastSeenTimeStamp, started_us), Sample{started_us, 0});
      Record(&slot_history.samples, Sample{clocks.now_us, busy});
      // As in NVML, only processes that used the device since the caller's timestamp appear.
      if (clocks.now_us <= lastSeenTimeStamp || busy <= base.busy_ns) continue;
      nvmlProcessUtilizationSample_t sample{};
      sample.pid = static_cast<unsigned int>(slot.pid);
      sample.timeStamp = clocks.now_us;
      sample.smUtil = Percent(busy, clocks.now_us, base);
      found.push_back(sample);
    }
    if (found.empty()) return NVML_ERROR_NOT_FOUND;
    const auto needed = static_cast<unsigned int>(found.size());
    if (utilization == nullptr || *processSamplesCount < needed) {
      *processSamplesCount = needed;
      return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    std::copy(found.begin(), found.end(), utilization);
    *processSamplesCount = needed;
    return NVML_SUCCESS;
  });
} catch (...) {
  return EntryFailed<nvmlReturn_t>(__func__);
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t* utilization) try {
  GPUSLICE_SIM_ENTRY();
  // A process younger than the shortest period waits for it once, without the library's lock.
  uint64_t wait_us = 0;
  WithDevice(device, [&](Session& session, int ordinal) {
    const std::vector<Sample>& samples = session.history(ordinal).samples;
    const uint64_t now_us = RealtimeNanos() / 1000;
    if (!samples.empty() && now_us < samples.front().time_us + kShortestPeriodUs)
      wait_us = samples.front().time_us + kShortestPeriodUs - now_us;
    return NVML_SUCCESS;
  });
  if (wait_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(wait_us));
  return WithDevice(device, [&](Session& session, int ordinal) {
    if (utilization == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (session.InMigMode(ordinal)) return NVML_ERROR_NOT_SUPPORTED;  // as NVML under MIG
    const Clocks clocks = ReadClocks();
    const uint64_t busy = session.state().device(ordinal).busy_ns.load();
    std::vector<Sample>& samples = session.history(ordinal).samples;
    const uint64_t period_start = clocks.now_us > kUtilizationPeriodUs ? clocks.now_us - kUtilizationPeriodUs : 0;
    // The newest sample that starts a whole period; in a process younger than that, its first.
    const Sample first = samples.empty() ? Sample{clocks.now_us, busy} : samples.front();
    const Sample base = BaselineAt(samples, period_start, first);
    Record(&samples, Sample{clocks.now_us, busy});
    utilization->gpu = Percent(busy, clocks.now_us, base);
    utilization->memory = 0;  // memory traffic is not simulated
    return NVML_SUCCESS;
  });
} catch (...) {
  return EntryFailed<nvmlReturn_t>(__func__);
}

}  // extern "C"
