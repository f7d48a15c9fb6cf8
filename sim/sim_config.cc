#include "sim/sim_config.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "common/quantity.h"
#include "gpu/mig_profiles.h"

namespace gpuslice::sim {

// NVIDIA's MIG tables are the product's (gpu/mig_profiles.h).
using gpu::FindMigGpuModel;
using gpu::kMigMemorySlices;
using gpu::MigGpuModel;
using gpu::MigPlacement;
using gpu::ValidateMigLayout;

namespace {

const char* Env(const char* name) {
  const char* value = std::getenv(name);
  return (value && *value) ? value : nullptr;
}

bool Fail(std::string* error, const char* name, const char* value, const char* example) {
  *error = std::string("gpuslice-sim: invalid ") + name + "='" + value + "'; expected " + example;
  return false;
}

// A stable, seed-dependent UUID per device (FNV-1a, then RFC 4122 version-4 bits).
void MakeUuid(std::string_view seed, int index, uint8_t (&uuid)[16]) {
  uint64_t h1 = 1469598103934665603ULL, h2 = 1099511628211ULL * 31;
  for (char c : seed) {
    h1 = (h1 ^ static_cast<uint8_t>(c)) * 1099511628211ULL;
    h2 = (h2 ^ static_cast<uint8_t>(c)) * 0x100000001b3ULL + 7;
  }
  h1 = (h1 ^ static_cast<uint64_t>(index + 1)) * 1099511628211ULL;
  h2 = (h2 ^ (static_cast<uint64_t>(index + 1) << 8)) * 0x9E3779B97F4A7C15ULL;
  std::memcpy(uuid, &h1, 8);
  std::memcpy(uuid + 8, &h2, 8);
  uuid[6] = static_cast<uint8_t>((uuid[6] & 0x0f) | 0x40);
  uuid[8] = static_cast<uint8_t>((uuid[8] & 0x3f) | 0x80);
}

}  // namespace

std::string SimStatePath() {
  const char* path = Env("GPUSLICE_SIM_STATE");
  return path ? path : "/dev/shm/gpuslice-sim";
}

namespace {

std::string FormatUuid(const char* prefix, const uint8_t (&u)[16]) {
  char text[64];
  std::snprintf(text, sizeof text, "%s-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", prefix,
                u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
  return text;
}

}  // namespace

std::string FormatGpuUuid(const uint8_t (&u)[16]) { return FormatUuid("GPU", u); }
std::string FormatMigUuid(const uint8_t (&u)[16]) { return FormatUuid("MIG", u); }

bool LoadSimConfigFromEnv(SimConfig* config, std::string* error) {
  int devices = 1;
  if (const char* v = Env("GPUSLICE_SIM_DEVICES")) {
    const auto n = ParseUnsigned(v);
    if (!n || *n < 1 || *n > static_cast<uint64_t>(kMaxDevices))
      return Fail(error, "GPUSLICE_SIM_DEVICES", v, "a device count from 1 to 8, e.g. 2");
    devices = static_cast<int>(*n);
  }
  // GPUSLICE_SIM_MODEL: one of the GPUs whose MIG profiles the simulator knows; it sets the
  // name, memory and SM count that the variables below do not.
  const MigGpuModel* model = nullptr;
  if (const char* v = Env("GPUSLICE_SIM_MODEL")) {
    model = FindMigGpuModel(v);
    if (!model) return Fail(error, "GPUSLICE_SIM_MODEL", v, "A100-40GB, A100-80GB, H100-80GB or H200");
  }
  uint64_t memory = model ? model->memory_bytes : 80ULL << 30;
  if (const char* v = Env("GPUSLICE_SIM_MEMORY")) {
    const auto bytes = ParseByteQuantity(v);
    if (!bytes || *bytes < (1ULL << 20))
      return Fail(error, "GPUSLICE_SIM_MEMORY", v, "a quantity of at least 1Mi, e.g. 80Gi or 16G");
    memory = *bytes;
  }
  std::string name = model ? std::string(model->name) + " (simulated)" : "NVIDIA H100 80GB HBM3 (simulated)";
  if (const char* v = Env("GPUSLICE_SIM_NAME")) {
    if (std::strlen(v) >= sizeof(SimDeviceConfig::name))
      return Fail(error, "GPUSLICE_SIM_NAME", v, "a name of at most 95 characters");
    name = v;
  }
  int sm_count = model ? model->sm_count : 132;
  if (const char* v = Env("GPUSLICE_SIM_SM_COUNT")) {
    const auto n = ParseUnsigned(v);
    if (!n || *n < 1 || *n > 1024) return Fail(error, "GPUSLICE_SIM_SM_COUNT", v, "1 to 1024, e.g. 132");
    sm_count = static_cast<int>(*n);
  }
  int cc_major = 9, cc_minor = 0;
  if (const char* v = Env("GPUSLICE_SIM_COMPUTE_CAPABILITY")) {
    std::string_view text(v);
    const auto dot = text.find('.');
    const auto major = dot == text.npos ? std::nullopt : ParseUnsigned(text.substr(0, dot));
    const auto minor = dot == text.npos ? std::nullopt : ParseUnsigned(text.substr(dot + 1));
    if (!major || !minor || *major < 3 || *major > 20 || *minor > 9)
      return Fail(error, "GPUSLICE_SIM_COMPUTE_CAPABILITY", v, "major.minor, e.g. 9.0");
    cc_major = static_cast<int>(*major);
    cc_minor = static_cast<int>(*minor);
  }
  uint64_t timeslice_us = 2000;
  if (const char* v = Env("GPUSLICE_SIM_TIMESLICE_US")) {
    const auto n = ParseUnsigned(v);
    if (!n || *n < 100 || *n > 1'000'000)
      return Fail(error, "GPUSLICE_SIM_TIMESLICE_US", v, "microseconds from 100 to 1000000, e.g. 2000");
    timeslice_us = *n;
  }
  uint64_t context_memory = 0;
  if (const char* v = Env("GPUSLICE_SIM_CONTEXT_MEMORY")) {
    const auto bytes = ParseByteQuantity(v);
    if (!bytes || *bytes > memory)
      return Fail(error, "GPUSLICE_SIM_CONTEXT_MEMORY", v, "a quantity below the device memory, e.g. 300Mi");
    context_memory = *bytes;
  }
  uint64_t kernel_ns = 0;
  if (const char* v = Env("GPUSLICE_SIM_KERNEL_NS")) {
    const auto n = ParseUnsigned(v);
    if (!n || *n > 60'000'000'000ULL)
      return Fail(error, "GPUSLICE_SIM_KERNEL_NS", v, "nanoseconds up to 60000000000, e.g. 50000");
    kernel_ns = *n;
  }
  const char* seed = Env("GPUSLICE_SIM_UUID_SEED");
  bool mps = false;
  if (const char* v = Env("GPUSLICE_SIM_MPS")) {
    if (std::strcmp(v, "1") != 0 && std::strcmp(v, "0") != 0)
      return Fail(error, "GPUSLICE_SIM_MPS", v, "1 (an MPS server on every device) or 0");
    mps = v[0] == '1';
  }
  uint32_t driver_branch = 580;
  if (const char* v = Env("GPUSLICE_SIM_DRIVER_VERSION")) {
    // "615" or "615.12": the branch is what decides which features the driver has.
    const std::string_view text(v);
    const auto dot = text.find('.');
    const auto branch = ParseUnsigned(text.substr(0, dot));
    const bool minor_ok = dot == text.npos || ParseUnsigned(text.substr(dot + 1)).has_value();
    if (!branch || !minor_ok || *branch < 400 || *branch > 999)
      return Fail(error, "GPUSLICE_SIM_DRIVER_VERSION", v,
                  "a driver version from 400 to 999, e.g. 615 (memory partitioning) or 580.65");
    driver_branch = static_cast<uint32_t>(*branch);
  }
  std::vector<MigPlacement> mig;
  if (const char* v = Env("GPUSLICE_SIM_MIG")) {
    if (mps) {
      *error =
          "gpuslice-sim: GPUSLICE_SIM_MPS=1 with GPUSLICE_SIM_MIG: MPS inside MIG instances is not simulated; set one of them";
      return false;
    }
    if (!model) {
      *error = std::string("gpuslice-sim: GPUSLICE_SIM_MIG='") + v +
               "' needs GPUSLICE_SIM_MODEL (A100-40GB, A100-80GB, H100-80GB or H200) to know the GPU's MIG profiles";
      return false;
    }
    Result<std::vector<MigPlacement>> placed = ValidateMigLayout(*model, v);
    if (!placed.ok()) {
      *error = std::string("gpuslice-sim: invalid GPUSLICE_SIM_MIG='") + v + "' on " + model->key + ": " +
               placed.message();
      return false;
    }
    mig = std::move(placed).value();
  }

  // GPUSLICE_SIM_MIG_GPUS: how many devices, the first ones, carry that layout (a node with some
  // GPUs in MIG mode and the others whole); all of them when unset.
  int mig_gpus = devices;
  if (const char* v = Env("GPUSLICE_SIM_MIG_GPUS")) {
    const auto n = ParseUnsigned(v);
    if (!n || *n > static_cast<uint64_t>(devices))
      return Fail(error, "GPUSLICE_SIM_MIG_GPUS", v, "a count from 0 to GPUSLICE_SIM_DEVICES, e.g. 2");
    mig_gpus = static_cast<int>(*n);
  }

  config->device_count = devices;
  config->default_kernel_ns = kernel_ns;
  config->driver_branch = driver_branch;
  for (int i = 0; i < kMaxDevices; ++i) {
    SimDeviceConfig& d = config->devices[i];
    d = SimDeviceConfig{};
    std::snprintf(d.name, sizeof d.name, "%s", name.c_str());
    MakeUuid(seed ? seed : "gpuslice-sim", i, d.uuid);
    d.total_memory = memory;
    d.timeslice_ns = timeslice_us * 1000;
    d.context_memory = context_memory;
    d.sm_count = sm_count;
    d.cc_major = cc_major;
    d.cc_minor = cc_minor;
    d.pci_bus_id = 0x18 + i * 0x10;
  }
  // MIG: every device carries the layout; each instance gets its memory slices' share of the
  // device memory, its profile's SMs and a UUID of its own.
  config->mps_enabled_gpus = mps ? (1u << devices) - 1 : 0;
  config->mig_instance_count = 0;
  config->mig_enabled_gpus = 0;
  for (int g = 0; g < mig_gpus && !mig.empty(); ++g) {
    config->mig_enabled_gpus |= 1u << g;
    for (size_t k = 0; k < mig.size(); ++k) {
      const int n = static_cast<int>(config->mig_instance_count++);
      const MigPlacement& p = mig[k];
      SimMigInstance& inst = config->mig_instances[n];
      inst.gpu = g;
      inst.gpu_instance_id = static_cast<int32_t>(k + 1);
      inst.nvml_profile = p.profile->nvml_profile;
      inst.start = p.start;
      inst.compute_slices = p.profile->compute_slices;
      inst.memory_slices = p.profile->memory_slices;
      std::snprintf(inst.profile, sizeof inst.profile, "%s", p.profile->name);
      SimDeviceConfig& u = config->mig_units[n];
      u = config->devices[g];
      std::snprintf(u.name, sizeof u.name, "%s MIG %s (simulated)", model->name, p.profile->name);
      MakeUuid(std::string(seed ? seed : "gpuslice-sim") + "/mig", n, u.uuid);
      u.total_memory = memory / kMigMemorySlices * static_cast<uint64_t>(p.profile->memory_slices);
      u.sm_count = p.profile->sm_count;
    }
  }
  return true;
}

}  // namespace gpuslice::sim
