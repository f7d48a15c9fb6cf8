#include "sim/call_model.h"

#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "common/clock.h"

namespace gpuslice::sim {
namespace {

constexpr const char* kCostsVariable = "GPUSLICE_SIM_CALL_COSTS";
constexpr const char* kCountsVariable = "GPUSLICE_SIM_CALL_COUNTS";

// The kinds as GPUSLICE_SIM_CALL_COSTS names them, in CallKind order.
constexpr const char* kKindNames[kCallKinds] = {"launch",  "event_record", "query", "sync",
                                                "context", "allocation",   "nvml",  "other"};

bool StartsWith(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

bool ParseNanos(std::string_view text, uint32_t* ns) {
  if (text.empty() || text.size() > 9) return false;
  uint32_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    value = value * 10 + static_cast<uint32_t>(c - '0');
  }
  *ns = value;
  return true;
}

}  // namespace

CallKind KindOfEntryPoint(const char* name) {
  const std::string_view n(name);
  if (StartsWith(n, "nvml")) return CallKind::kNvml;
  if (StartsWith(n, "cuLaunch") || StartsWith(n, "cuGraphLaunch")) return CallKind::kLaunch;
  if (StartsWith(n, "cuEventRecord")) return CallKind::kEventRecord;
  if (StartsWith(n, "cuEventQuery") || StartsWith(n, "cuStreamQuery")) return CallKind::kQuery;
  if (n.find("Synchronize") != std::string_view::npos) return CallKind::kSync;
  for (std::string_view c : {"cuCtxGetCurrent", "cuCtxSetCurrent", "cuCtxPushCurrent", "cuCtxPopCurrent",
                             "cuCtxGetDevice", "cuStreamGetCtx"}) {
    if (StartsWith(n, c)) return CallKind::kContext;
  }
  for (std::string_view a :
       {"cuMemAlloc", "cuMemFree", "cuMemCreate", "cuMemRelease", "cuArrayCreate", "cuArray3DCreate", "cuArrayDestroy",
        "cuMipmappedArrayCreate", "cuMipmappedArrayDestroy", "cuMemMap", "cuMemUnmap"}) {
    if (StartsWith(n, a)) return CallKind::kAllocation;
  }
  return CallKind::kOther;
}

// Sources and uncertainty: docs/simulator.md, "What calls cost".
CallCosts DefaultCallCosts() {
  CallCosts c;
  c.by_kind[static_cast<int>(CallKind::kLaunch)] = 2200;
  c.by_kind[static_cast<int>(CallKind::kEventRecord)] = 2000;
  c.by_kind[static_cast<int>(CallKind::kQuery)] = 500;
  c.by_kind[static_cast<int>(CallKind::kSync)] = 1000;
  c.by_kind[static_cast<int>(CallKind::kContext)] = 30;
  c.by_kind[static_cast<int>(CallKind::kAllocation)] = 2000;
  c.by_kind[static_cast<int>(CallKind::kNvml)] = 5000;
  c.by_kind[static_cast<int>(CallKind::kOther)] = 200;
  return c;
}

bool ParseCallCosts(const std::string& value, CallCosts* costs, std::string* by_name, std::string* error) {
  *costs = CallCosts{};
  by_name->clear();
  std::string_view rest(value);
  const size_t comma = rest.find(',');
  const std::string_view profile = rest.substr(0, comma);
  rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
  if (profile == "default" || profile == "double") {
    *costs = DefaultCallCosts();
    if (profile == "double") {
      for (uint32_t& ns : costs->by_kind) ns *= 2;
    }
  } else if (!profile.empty() && profile != "off") {
    *error = "unknown profile '" + std::string(profile) + "'";
    return false;
  }
  while (!rest.empty()) {
    const size_t next = rest.find(',');
    const std::string_view item = rest.substr(0, next);
    rest = next == std::string_view::npos ? std::string_view() : rest.substr(next + 1);
    const size_t eq = item.find('=');
    uint32_t ns = 0;
    if (eq == std::string_view::npos || !ParseNanos(item.substr(eq + 1), &ns)) {
      *error = "'" + std::string(item) + "' is not <kind or entry point>=<nanoseconds>";
      return false;
    }
    const std::string_view key = item.substr(0, eq);
    bool kind = false;
    for (int k = 0; k < kCallKinds; ++k) {
      if (key == kKindNames[k]) costs->by_kind[k] = ns, kind = true;
    }
    if (kind) continue;
    if (!StartsWith(key, "cu") && !StartsWith(key, "nvml")) {
      *error = "'" + std::string(key) + "' is neither a kind nor an entry point";
      return false;
    }
    if (!by_name->empty()) by_name->push_back(',');
    by_name->append(item);
  }
  return true;
}

namespace call_model {

thread_local uint32_t t_depth = 0;
std::atomic<bool> g_active{false};

namespace {

// Nothing here takes a lock or a guarded static: a fork() while another thread is inside its
// first call of an entry point must leave the child able to call it (the shim's fork tests do
// exactly that). An entry point two threads register at once gets two slots; the counts file
// adds them up by name.
struct Registry {
  std::atomic<uint32_t> used{0};
  std::atomic<const char*> names[kMaxEntries] = {};
  uint32_t cost_ns[kMaxEntries] = {};
  std::atomic<uint64_t> counts[kMaxEntries] = {};
  CallCosts costs;
  std::string by_name;
  std::string counts_path;
  const char* library = "cuda";
  bool valid = true;
  bool counting = false;
  double loops_per_ns = 0;  // the spin loop's speed, for costs below a microsecond
};

Registry* g_registry = nullptr;  // never destroyed: entry points may run during exit

void LoadSettings(Registry* r);

// At the library's load, before any thread can call into it.
__attribute__((constructor)) void CreateRegistry() {
  if (g_registry) return;
  g_registry = new Registry();
  LoadSettings(g_registry);
}

Registry& TheRegistry() {
  if (!g_registry) CreateRegistry();  // an entry point called by another library's constructor
  return *g_registry;
}

// A loop the compiler keeps: the empty asm makes the counter opaque.
void SpinLoops(uint64_t loops) {
  for (uint64_t i = 0; i < loops; ++i) asm volatile("" : "+r"(i));
}

// How many iterations of the spin loop take a nanosecond, measured once.
double CalibrateLoops() {
  constexpr uint64_t kIterations = 2'000'000;
  const uint64_t start = MonotonicNanos();
  SpinLoops(kIterations);
  const uint64_t elapsed = MonotonicNanos() - start;
  return elapsed ? static_cast<double>(kIterations) / static_cast<double>(elapsed) : 1.0;
}

void Spin(uint32_t ns, double loops_per_ns) {
  if (ns < 1000) {  // a clock read is tens of ns: short costs are counted out in loop iterations
    SpinLoops(static_cast<uint64_t>(ns * loops_per_ns));
    return;
  }
  const uint64_t deadline = MonotonicNanos() + ns;
  while (MonotonicNanos() < deadline) {
  }
}

void WriteCounts();

void ZeroCountsInChild() {
  Registry& r = TheRegistry();
  for (auto& count : r.counts) count.store(0, std::memory_order_relaxed);
}

void LoadSettings(Registry* r) {
  if (const char* value = std::getenv(kCostsVariable)) {
    std::string error;
    if (!ParseCallCosts(value, &r->costs, &r->by_name, &error)) {
      r->valid = false;
      std::fprintf(stderr,
                   "gpuslice-sim: %s='%s': %s; valid: off, default or double, then optional "
                   "',<kind or entry point>=<ns>' (kinds: launch, event_record, query, sync, context, "
                   "allocation, nvml, other)\n",
                   kCostsVariable, value, error.c_str());
    }
  }
  if (const char* path = std::getenv(kCountsVariable); path && *path) {
    r->counts_path = path;
    r->counting = true;
    std::atexit(WriteCounts);
    pthread_atfork(nullptr, nullptr, ZeroCountsInChild);
  }
  bool any_cost = !r->by_name.empty();
  for (uint32_t ns : r->costs.by_kind) any_cost = any_cost || ns != 0;
  if (any_cost) r->loops_per_ns = CalibrateLoops();
  g_active.store(any_cost || r->counting, std::memory_order_release);
}

uint32_t CostOf(const Registry& r, const char* name) {
  const std::string_view wanted(name);
  std::string_view rest(r.by_name);
  while (!rest.empty()) {
    const size_t next = rest.find(',');
    const std::string_view item = rest.substr(0, next);
    rest = next == std::string_view::npos ? std::string_view() : rest.substr(next + 1);
    const size_t eq = item.find('=');
    uint32_t ns = 0;
    if (item.substr(0, eq) == wanted && ParseNanos(item.substr(eq + 1), &ns)) return ns;
  }
  return r.costs.by_kind[static_cast<int>(KindOfEntryPoint(name))];
}

// One JSON line: {"library":"cuda","pid":N,"calls":{"cuLaunchKernel":N,...}}, appended with one
// write so that the processes sharing a file do not interleave.
void WriteCounts() {
  Registry& r = TheRegistry();
  std::string path;
  for (size_t i = 0; i < r.counts_path.size(); ++i) {
    if (r.counts_path[i] == '%' && i + 1 < r.counts_path.size() && r.counts_path[i + 1] == 'p') {
      path += std::to_string(getpid());
      ++i;
    } else {
      path += r.counts_path[i];
    }
  }
  std::string line = "{\"library\":\"" + std::string(r.library) + "\",\"pid\":" + std::to_string(getpid()) +
                     ",\"calls\":{";
  bool first = true;
  const uint32_t used = std::min<uint32_t>(r.used.load(), kMaxEntries);
  for (uint32_t i = 0; i < used; ++i) {
    const char* name = r.names[i].load();
    if (!name) continue;
    uint64_t n = 0;
    bool earlier = false;  // the same entry point in an earlier slot: counted there
    for (uint32_t j = 0; j < used; ++j) {
      const char* other = r.names[j].load();
      if (!other || std::strcmp(other, name) != 0) continue;
      if (j < i) earlier = true;
      n += r.counts[j].load(std::memory_order_relaxed);
    }
    if (n == 0 || earlier) continue;
    line += (first ? "\"" : ",\"") + std::string(name) + "\":" + std::to_string(n);
    first = false;
  }
  line += "}}\n";
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) {
    std::fprintf(stderr, "gpuslice-sim: %s: cannot open '%s': %s\n", kCountsVariable, path.c_str(),
                 std::strerror(errno));
    return;
  }
  if (write(fd, line.data(), line.size()) != static_cast<ssize_t>(line.size()))
    std::fprintf(stderr, "gpuslice-sim: %s: short write to '%s'\n", kCountsVariable, path.c_str());
  close(fd);
}

}  // namespace

EntryIndex Register(const char* name) noexcept {
  Registry& r = TheRegistry();
  const uint32_t slot = r.used.fetch_add(1);
  if (slot >= kMaxEntries) return kMaxEntries - 1;  // not reached: the libraries export fewer
  r.cost_ns[slot] = CostOf(r, name);
  r.names[slot].store(name, std::memory_order_release);
  return static_cast<EntryIndex>(slot);
}

void Enter(EntryIndex index) noexcept {
  Registry& r = TheRegistry();
  if (r.counting) r.counts[index].fetch_add(1, std::memory_order_relaxed);
  if (const uint32_t ns = r.cost_ns[index]) Spin(ns, r.loops_per_ns);
}

void SetLibraryName(const char* name) noexcept { TheRegistry().library = name; }

bool SettingsValid() noexcept { return TheRegistry().valid; }

}  // namespace call_model
}  // namespace gpuslice::sim
