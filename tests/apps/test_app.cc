#include "tests/apps/test_app.h"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <random>
#include <set>
#include <string_view>
#include <thread>

#include "common/array_bytes.h"
#include "common/quantity.h"

extern char** environ;

namespace gpuslice::testapp {
namespace {

constexpr int kExitOk = 0;
constexpr int kExitDriverFailure = 1;
constexpr int kExitSetupFailed = 3;
constexpr uint64_t kRowBytes = 64 * 1024;
constexpr double kChurnLimitS = 60;

std::atomic<bool> g_stop{false};

void OnStopSignal(int) { g_stop.store(true); }

// Ends a --hold early on SIGTERM/SIGINT, so a test can stop a holder and still read its result.
void InstallStopHandler() {
  struct sigaction action {};
  action.sa_handler = OnStopSignal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
}

// Sleeps `seconds`, or until a stop signal.
void Hold(double seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!g_stop.load() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
}

int64_t RealtimeMs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

void WaitUntilRealtime(int64_t ms) {
  while (ms > 0) {
    const int64_t left = ms - RealtimeMs();
    if (left <= 0) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min<int64_t>(left, 5)));
  }
}

void Complain(const std::string& line) {
  const std::string text = "gpuslice-test-app: " + line + "\n";
  (void)!write(STDERR_FILENO, text.data(), text.size());
}

bool ParseInt(const char* text, int min, int max, int* out) {
  const auto value = ParseUnsigned(text);
  if (!value || *value < static_cast<uint64_t>(min) || *value > static_cast<uint64_t>(max)) return false;
  *out = static_cast<int>(*value);
  return true;
}

bool ParseSeconds(const char* text, double* out) {
  char* end = nullptr;
  const double value = std::strtod(text, &end);
  if (end == text || *end != '\0' || value < 0) return false;
  *out = value;
  return true;
}

// ---- what one allocation of each API is ----

struct Item {
  CUdeviceptr ptr = 0;
  size_t bytes = 0;  // the charge the driver (and gpuslice) count for it
  CUmemGenericAllocationHandle handle = 0;
  CUarray array = nullptr;
  CUmipmappedArray mipmap = nullptr;
};

// Everything the allocating calls need that is set up once per process.
struct Session {
  CUdevice device = 0;
  CUcontext ctx = nullptr;
  CUmemoryPool pool = nullptr;
  CUstream stream = nullptr;  // of async/pool allocations (--stream-device), else stream 0
  size_t granularity = 0;
  CUresult init = CUDA_ERROR_UNKNOWN;
  CUresult setup = CUDA_ERROR_UNKNOWN;  // first failure after cuInit, or success
};

CUDA_ARRAY_DESCRIPTOR Array2D(uint64_t chunk) {
  CUDA_ARRAY_DESCRIPTOR desc{};
  desc.Width = std::min(chunk, kRowBytes);
  desc.Height = (chunk + desc.Width - 1) / desc.Width;
  desc.Format = CU_AD_FORMAT_UNSIGNED_INT8;
  desc.NumChannels = 1;
  return desc;
}

CUDA_ARRAY3D_DESCRIPTOR Array3D(uint64_t chunk) {
  CUDA_ARRAY3D_DESCRIPTOR desc{};
  desc.Width = std::min<uint64_t>(chunk, 1024);
  desc.Height = std::min<uint64_t>((chunk + desc.Width - 1) / desc.Width, 1024);
  desc.Depth = (chunk + desc.Width * desc.Height - 1) / (desc.Width * desc.Height);
  desc.Format = CU_AD_FORMAT_UNSIGNED_INT8;
  desc.NumChannels = 1;
  return desc;
}

// A two-level mipmap whose base level is the 2D array of `chunk` bytes (so it takes 1.25 ×).
CUDA_ARRAY3D_DESCRIPTOR MipmapBase(uint64_t chunk) {
  const CUDA_ARRAY_DESCRIPTOR d2 = Array2D(chunk);
  CUDA_ARRAY3D_DESCRIPTOR desc{};
  desc.Width = d2.Width;
  desc.Height = d2.Height;
  desc.Format = d2.Format;
  desc.NumChannels = 1;
  return desc;
}
constexpr unsigned int kMipmapLevels = 2;

// The bytes one allocation of `options.chunk` takes with options.api (what the tests expect to
// be charged per item).
uint64_t ItemBytes(const Options& o, const Session& s) {
  if (o.api == "pitch" || o.api == "array") {
    const CUDA_ARRAY_DESCRIPTOR d = Array2D(o.chunk);
    return static_cast<uint64_t>(d.Width) * d.Height;
  }
  if (o.api == "array3d") return ArrayBytes(Array3D(o.chunk)).value_or(0);
  if (o.api == "mipmap") return MipmappedArrayBytes(MipmapBase(o.chunk), kMipmapLevels).value_or(0);
  if (o.api == "vmm" && s.granularity) return (o.chunk + s.granularity - 1) / s.granularity * s.granularity;
  return o.chunk;
}

bool KnownApi(const std::string& api) {
  for (const char* known : {"alloc", "pitch", "managed", "async", "pool", "vmm", "array", "array3d", "mipmap"})
    if (api == known) return true;
  return false;
}

class Allocator {
 public:
  Allocator(const DriverTable& d, const Options& o, const Session& s) : d_(d), o_(o), s_(s) {}

  // The result of the allocating call itself; *unexpected is set when a follow-up call
  // (synchronisation, mapping) fails, which is a failure of the program, not a refusal.
  CUresult Allocate(Item* item, bool* unexpected) const {
    const std::string& api = o_.api;
    item->bytes = ItemBytes(o_, s_);
    CUresult rc = CUDA_SUCCESS;
    if (api == "alloc") return d_.mem_alloc(&item->ptr, o_.chunk);
    if (api == "managed") return d_.mem_alloc_managed(&item->ptr, o_.chunk, CU_MEM_ATTACH_GLOBAL);
    if (api == "pitch") {
      CUDA_ARRAY_DESCRIPTOR shape = Array2D(o_.chunk);
      if (o_.pitch_width) {
        shape.Width = o_.pitch_width;
        shape.Height = 2;
      }
      size_t pitch = 0;
      rc = d_.mem_alloc_pitch(&item->ptr, &pitch, shape.Width, shape.Height, 4);
      if (rc == CUDA_SUCCESS) item->bytes = pitch * shape.Height;
      return rc;
    }
    if (api == "async" || api == "pool") {
      rc = api == "async" ? d_.mem_alloc_async(&item->ptr, o_.chunk, s_.stream)
                          : d_.mem_alloc_from_pool_async(&item->ptr, o_.chunk, s_.pool, s_.stream);
      if (rc == CUDA_SUCCESS && d_.stream_synchronize(s_.stream) != CUDA_SUCCESS) *unexpected = true;
      return rc;
    }
    if (api == "vmm") {
      CUmemAllocationProp prop = DeviceProp();
      rc = d_.mem_create(&item->handle, item->bytes, &prop, 0);
      if (rc != CUDA_SUCCESS) return rc;
      CUmemAccessDesc access{};
      access.location = prop.location;
      access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
      if (d_.mem_address_reserve(&item->ptr, item->bytes, 0, 0, 0) != CUDA_SUCCESS ||
          d_.mem_map(item->ptr, item->bytes, 0, item->handle, 0) != CUDA_SUCCESS ||
          d_.mem_set_access(item->ptr, item->bytes, &access, 1) != CUDA_SUCCESS)
        *unexpected = true;
      return rc;
    }
    if (api == "array") {
      const CUDA_ARRAY_DESCRIPTOR desc = Array2D(o_.chunk);
      return d_.array_create(&item->array, &desc);
    }
    if (api == "array3d") {
      const CUDA_ARRAY3D_DESCRIPTOR desc = Array3D(o_.chunk);
      return d_.array3d_create(&item->array, &desc);
    }
    const CUDA_ARRAY3D_DESCRIPTOR desc = MipmapBase(o_.chunk);
    return d_.mipmapped_array_create(&item->mipmap, &desc, kMipmapLevels);
  }

  bool Free(const Item& item) const {
    const std::string& api = o_.api;
    if (api == "alloc" || api == "managed" || api == "pitch") return d_.mem_free(item.ptr) == CUDA_SUCCESS;
    if (api == "async" || api == "pool")
      return d_.mem_free_async(item.ptr, s_.stream) == CUDA_SUCCESS && d_.stream_synchronize(s_.stream) == CUDA_SUCCESS;
    if (api == "vmm")
      return d_.mem_unmap(item.ptr, item.bytes) == CUDA_SUCCESS && d_.mem_release(item.handle) == CUDA_SUCCESS &&
             d_.mem_address_free(item.ptr, item.bytes) == CUDA_SUCCESS;
    if (api == "array" || api == "array3d") return d_.array_destroy(item.array) == CUDA_SUCCESS;
    return d_.mipmapped_array_destroy(item.mipmap) == CUDA_SUCCESS;
  }

  CUmemAllocationProp DeviceProp() const {
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = s_.device;
    return prop;
  }

 private:
  const DriverTable& d_;
  const Options& o_;
  const Session& s_;
};

// cuInit, the primary context of --device made current, and what the API needs (a pool, the
// VMM granularity). Called again in a forked child, which starts with the driver uninitialised.
// A stream on device `ordinal` (its primary context made current for the call) and, for the
// pool api, a pool on it: --stream-device.
CUresult SetUpStreamDevice(const DriverTable& d, const Options& o, Session* s) {
  CUdevice device = 0;
  CUcontext ctx = nullptr;
  CUresult rc = d.device_get(&device, o.stream_device);
  if (rc == CUDA_SUCCESS) rc = d.primary_ctx_retain(&ctx, device);
  if (rc == CUDA_SUCCESS) rc = d.ctx_set_current(ctx);
  if (rc == CUDA_SUCCESS) rc = d.stream_create(&s->stream, CU_STREAM_NON_BLOCKING);
  return rc;
}

void SetUp(const DriverTable& d, const Options& o, Session* s) {
  s->init = d.init(0);
  CUresult rc = s->init;
  if (rc == CUDA_SUCCESS && o.stream_device >= 0) rc = SetUpStreamDevice(d, o, s);
  if (rc == CUDA_SUCCESS) rc = d.device_get(&s->device, o.device);
  if (rc == CUDA_SUCCESS && o.teardown == "destroy") {
    rc = d.ctx_create(&s->ctx, nullptr, 0, s->device);  // made current
  } else {
    if (rc == CUDA_SUCCESS) rc = d.primary_ctx_retain(&s->ctx, s->device);
    if (rc == CUDA_SUCCESS) rc = d.ctx_set_current(s->ctx);
  }
  if (rc == CUDA_SUCCESS && o.api == "pool") {
    CUmemPoolProps props{};
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = o.stream_device >= 0 ? o.stream_device : s->device;
    rc = d.mem_pool_create(&s->pool, &props);
  }
  if (rc == CUDA_SUCCESS && o.api == "vmm") {
    CUmemAllocationProp prop = Allocator(d, o, *s).DeviceProp();
    rc = d.mem_get_allocation_granularity(&s->granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
  }
  s->setup = rc;
}

std::string MemInfo(const DriverTable& d) {
  size_t free = 0, total = 0;
  const CUresult rc = d.mem_get_info(&free, &total);
  JsonLine j;
  if (rc != CUDA_SUCCESS) return j.Add("error", ErrorName(d, rc)).Text();
  return j.Add("free", uint64_t{free}).Add("total", uint64_t{total}).Text();
}

// What a batch of allocations came to.
struct Tally {
  std::vector<Item> items;
  std::map<std::string, int> refusals;
  int refused = 0;
  bool unexpected = false;

  void Merge(Tally&& other) {
    items.insert(items.end(), other.items.begin(), other.items.end());
    for (const auto& [name, n] : other.refusals) refusals[name] += n;
    refused += other.refused;
    unexpected = unexpected || other.unexpected;
  }
  uint64_t Bytes() const {
    uint64_t sum = 0;
    for (const Item& i : items) sum += i.bytes;
    return sum;
  }
  std::string RefusalsJson() const {
    JsonLine j;
    for (const auto& [name, n] : refusals) j.Add(name, n);
    return j.Text();
  }
};

void AllocateInto(const DriverTable& d, const Allocator& allocator, int count, Tally* tally) {
  for (int i = 0; i < count; ++i) {
    Item item;
    bool unexpected = false;
    const CUresult rc = allocator.Allocate(&item, &unexpected);
    if (rc == CUDA_SUCCESS) {
      tally->items.push_back(item);
    } else {
      ++tally->refused;
      ++tally->refusals[ErrorName(d, rc)];
    }
    if (unexpected) {
      Complain("a call completing a successful allocation failed");
      tally->unexpected = true;
    }
  }
}

bool FreeAll(const Allocator& allocator, std::vector<Item>* items) {
  bool ok = true;
  while (!items->empty()) {
    ok = allocator.Free(items->back()) && ok;
    items->pop_back();
  }
  return ok;
}

// --threads workers, each with the context current, starting together (at --start-at).
Tally AllocateConcurrently(const DriverTable& d, const Options& o, const Session& s, const Allocator& allocator) {
  std::mutex mutex;
  Tally total;
  std::vector<std::thread> workers;
  for (int t = 0; t < o.threads; ++t) {
    workers.emplace_back([&] {
      Tally mine;
      if (s.ctx) d.ctx_set_current(s.ctx);
      WaitUntilRealtime(o.start_at_ms);
      AllocateInto(d, allocator, o.count, &mine);
      std::lock_guard<std::mutex> lock(mutex);
      total.Merge(std::move(mine));
    });
  }
  for (auto& w : workers) w.join();
  return total;
}

// --pairs: every thread allocates one chunk and frees it at once, `o.pairs` times. A free that
// races another thread's allocation of the same address is where a charge can be lost.
struct PairsResult {
  int refused = 0;
  bool unexpected = false;
  uint64_t shared_addresses = 0;  // addresses handed to more than one thread
};

PairsResult AllocateAndFreePairs(const DriverTable& d, const Options& o, const Session& s, const Allocator& allocator) {
  std::mutex mutex;
  PairsResult result;
  std::map<CUdeviceptr, std::set<int>> threads_of_address;
  std::vector<std::thread> workers;
  for (int t = 0; t < o.threads; ++t) {
    workers.emplace_back([&, t] {
      if (s.ctx) d.ctx_set_current(s.ctx);
      WaitUntilRealtime(o.start_at_ms);
      std::set<CUdeviceptr> seen;
      int refused = 0;
      bool unexpected = false;
      for (int i = 0; i < o.pairs; ++i) {
        Item item;
        if (allocator.Allocate(&item, &unexpected) != CUDA_SUCCESS) {
          ++refused;
          continue;
        }
        seen.insert(item.ptr);
        if (!allocator.Free(item)) unexpected = true;
      }
      std::lock_guard<std::mutex> lock(mutex);
      result.refused += refused;
      result.unexpected = result.unexpected || unexpected;
      for (CUdeviceptr p : seen) threads_of_address[p].insert(t);
    });
  }
  for (auto& w : workers) w.join();
  for (const auto& [address, threads] : threads_of_address) result.shared_addresses += threads.size() > 1;
  return result;
}

// --teardown: the driver frees everything the context holds; the items are gone with it.
CUresult TearDownContext(const DriverTable& d, const Options& o, Session* s) {
  if (o.teardown == "destroy") return d.ctx_destroy(s->ctx);
  if (o.teardown == "reset") return d.primary_ctx_reset(s->device);
  return d.primary_ctx_release(s->device);  // the only retain: the last release
}

// Allocates and frees at random until killed: a test SIGKILLs it at a random moment, which may
// fall inside the shim's reserve/allocate/commit or free/credit sequence.
int Churn(const DriverTable& d, const Options& o, const Session& s, const Allocator& allocator) {
  JsonLine().Add("event", "churning").Add("pid", static_cast<int64_t>(getpid())).Print();
  std::atomic<bool> failed{false};
  std::vector<std::thread> workers;
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(kChurnLimitS);
  for (int t = 0; t < o.threads; ++t) {
    workers.emplace_back([&, t] {
      if (s.ctx) d.ctx_set_current(s.ctx);
      std::mt19937 random(static_cast<unsigned>(getpid()) * 7919u + t);
      while (!g_stop.load() && std::chrono::steady_clock::now() < end) {
        Tally batch;
        AllocateInto(d, allocator, 1 + static_cast<int>(random() % o.count), &batch);
        std::shuffle(batch.items.begin(), batch.items.end(), random);
        if (batch.unexpected || !FreeAll(allocator, &batch.items)) failed.store(true);
        if (random() % 4 == 0) std::this_thread::sleep_for(std::chrono::microseconds(random() % 500));
      }
    });
  }
  for (auto& w : workers) w.join();
  return failed.load() ? kExitDriverFailure : kExitOk;
}

// The child of --fork-child: a process of its own, which must initialise the driver again.
[[noreturn]] void RunForkedChild(const DriverTable& d, const Options& o) {
  Session s;
  Tally tally;
  if (!o.child_without_cuda) {
    SetUp(d, o, &s);
    AllocateInto(d, Allocator(d, o, s), o.fork_child, &tally);
  }
  JsonLine()
      .Add("event", "child")
      .Add("pid", static_cast<int64_t>(getpid()))
      .Add("init", o.child_without_cuda ? std::string("none") : ErrorName(d, s.init))
      .Add("allocated", static_cast<int>(tally.items.size()))
      .Add("refused", tally.refused)
      .AddRaw("refusals", tally.RefusalsJson())
      .Print();
  if (o.child_hold_s > 0) {
    JsonLine().Add("event", "child_holding").Add("pid", static_cast<int64_t>(getpid())).Print();
    Hold(o.child_hold_s);
  }
  // Its allocations are deliberately not freed: they must go with the process.
  if (o.child_exit_kill) raise(SIGKILL);
  std::exit(0);
}

}  // namespace

// ---- options and output ----

bool ParseOptions(int argc, char** argv, int first, const std::vector<std::string>& app_flags,
                  const std::vector<std::string>& app_switches, Options* out) {
  Options o;
  if (first >= argc) {
    Complain("usage: <api> [options]; api: alloc pitch managed async pool vmm array array3d mipmap");
    return false;
  }
  o.api = argv[first];
  if (!KnownApi(o.api)) {
    Complain("unknown api '" + o.api + "'");
    return false;
  }
  for (int i = first + 1; i < argc; ++i) {
    const std::string flag = argv[i];
    const bool is_switch = flag == "--refill" || flag == "--churn" || flag == "--spawn-sleeper" ||
                           flag == "--child-without-cuda" ||
                           std::find(app_switches.begin(), app_switches.end(), flag) != app_switches.end();
    if (is_switch) {
      if (flag == "--refill") o.refill = true;
      else if (flag == "--churn") o.churn = true;
      else if (flag == "--spawn-sleeper") o.spawn_sleeper = true;
      else if (flag == "--child-without-cuda") o.child_without_cuda = true;
      else o.app_flags[flag] = "1";
      continue;
    }
    if (i + 1 >= argc) {
      Complain("option " + flag + " needs a value");
      return false;
    }
    const char* value = argv[++i];
    bool ok = true;
    if (flag == "--chunk") {
      const auto bytes = ParseByteQuantity(value);
      ok = bytes && *bytes > 0;
      if (ok) o.chunk = *bytes;
    } else if (flag == "--count") {
      ok = ParseInt(value, 1, 1 << 20, &o.count);
    } else if (flag == "--threads") {
      ok = ParseInt(value, 1, 256, &o.threads);
    } else if (flag == "--device") {
      ok = ParseInt(value, 0, 63, &o.device);
    } else if (flag == "--hold") {
      ok = ParseSeconds(value, &o.hold_s);
    } else if (flag == "--start-at") {
      const auto ms = ParseUnsigned(value);
      ok = ms.has_value();
      if (ok) o.start_at_ms = static_cast<int64_t>(*ms);
    } else if (flag == "--pairs") {
      ok = ParseInt(value, 1, 1 << 24, &o.pairs);
    } else if (flag == "--teardown") {
      o.teardown = value;
      ok = o.teardown == "destroy" || o.teardown == "reset" || o.teardown == "release";
    } else if (flag == "--after-teardown") {
      ok = ParseInt(value, 1, 1 << 20, &o.after_teardown);
    } else if (flag == "--pitch-width") {
      const auto bytes = ParseUnsigned(value);
      ok = bytes && *bytes > 0;
      if (ok) o.pitch_width = *bytes;
    } else if (flag == "--stream-device") {
      ok = ParseInt(value, 0, 63, &o.stream_device);
    } else if (flag == "--fork-child") {
      ok = ParseInt(value, 0, 1 << 20, &o.fork_child);
    } else if (flag == "--child-hold") {
      ok = ParseSeconds(value, &o.child_hold_s);
    } else if (flag == "--child-exit") {
      ok = std::string_view(value) == "normal" || std::string_view(value) == "kill";
      o.child_exit_kill = std::string_view(value) == "kill";
    } else if (std::find(app_flags.begin(), app_flags.end(), flag) != app_flags.end()) {
      o.app_flags[flag] = value;
    } else {
      Complain("unknown option " + flag);
      return false;
    }
    if (!ok) {
      Complain("bad value for " + flag + ": '" + value + "'");
      return false;
    }
  }
  *out = std::move(o);
  return true;
}

std::string ErrorName(const DriverTable& d, CUresult rc) {
  const char* name = nullptr;
  if (d.get_error_name && d.get_error_name(rc, &name) == CUDA_SUCCESS && name) return name;
  return "CUresult(" + std::to_string(static_cast<int>(rc)) + ")";
}

std::string Quote(const std::string& text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\u%04x", c);
      out += escaped;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

void JsonLine::Key(const std::string& key) {
  if (!body_.empty()) body_ += ',';
  body_ += Quote(key) + ':';
}
JsonLine& JsonLine::Add(const std::string& key, const std::string& value) {
  Key(key);
  body_ += Quote(value);
  return *this;
}
JsonLine& JsonLine::Add(const std::string& key, uint64_t value) {
  Key(key);
  body_ += std::to_string(value);
  return *this;
}
JsonLine& JsonLine::Add(const std::string& key, int64_t value) {
  Key(key);
  body_ += std::to_string(value);
  return *this;
}
JsonLine& JsonLine::Add(const std::string& key, bool value) {
  Key(key);
  body_ += value ? "true" : "false";
  return *this;
}
JsonLine& JsonLine::AddRaw(const std::string& key, const std::string& json) {
  Key(key);
  body_ += json;
  return *this;
}
JsonLine& JsonLine::Append(const JsonLine& other) {
  if (!other.body_.empty()) body_ += (body_.empty() ? "" : ",") + other.body_;
  return *this;
}
void JsonLine::Print() const {
  const std::string line = Text() + "\n";
  (void)!write(STDOUT_FILENO, line.data(), line.size());
}

// ---- the program ----

int RunAllocations(const DriverTable& d, const Options& o, const std::string& app, const JsonLine& extra) {
  InstallStopHandler();
  Session s;
  SetUp(d, o, &s);
  if (s.init != CUDA_SUCCESS) Complain("cuInit failed: " + ErrorName(d, s.init));
  else if (s.setup != CUDA_SUCCESS) Complain("setting up the device failed: " + ErrorName(d, s.setup));
  const Allocator allocator(d, o, s);

  if (o.churn) return s.setup == CUDA_SUCCESS ? Churn(d, o, s, allocator) : kExitSetupFailed;

  size_t total_mem = 0;
  const CUresult total_rc = d.device_total_mem(&total_mem, s.device);
  const std::string mem_before = MemInfo(d);

  if (o.pairs > 0) {
    const PairsResult pairs = AllocateAndFreePairs(d, o, s, allocator);
    JsonLine()
        .Add("event", "pairs")
        .Add("pairs", static_cast<int64_t>(o.pairs) * o.threads)
        .Add("refused", pairs.refused)
        .Add("shared_addresses", pairs.shared_addresses)
        .Add("unexpected", pairs.unexpected)
        .Print();
  }

  Tally tally = AllocateConcurrently(d, o, s, allocator);
  const int allocated = static_cast<int>(tally.items.size());
  const int refused = tally.refused;
  const std::map<std::string, int> refusals = tally.refusals;
  const uint64_t bytes_obtained = tally.Bytes();
  const std::string mem_held = MemInfo(d);
  bool failed = tally.unexpected;

  // A free makes room at once, exactly once: the reallocation fits, the one after it does not.
  std::string refill = "[]";
  if (o.refill && !tally.items.empty()) {
    failed = !allocator.Free(tally.items.back()) || failed;
    tally.items.pop_back();
    refill = "[";
    Tally again;
    AllocateInto(d, allocator, 1, &again);
    refill += Quote(again.items.empty() ? again.refusals.begin()->first : "CUDA_SUCCESS");
    if (!again.items.empty()) {
      const size_t before = again.items.size();
      AllocateInto(d, allocator, 1, &again);
      refill += "," + Quote(again.items.size() > before ? "CUDA_SUCCESS" : again.refusals.begin()->first);
    }
    refill += "]";
    failed = failed || again.unexpected;
    tally.Merge(std::move(again));
  }

  std::string after_teardown;
  if (!o.teardown.empty()) {
    const CUresult torn = TearDownContext(d, o, &s);
    if (torn == CUDA_SUCCESS) tally.items.clear();  // freed by the driver with the context
    CUresult rc = torn == CUDA_SUCCESS ? d.primary_ctx_retain(&s.ctx, s.device) : torn;
    if (rc == CUDA_SUCCESS) rc = d.ctx_set_current(s.ctx);
    Tally again;
    if (rc == CUDA_SUCCESS) AllocateInto(d, allocator, o.after_teardown, &again);
    after_teardown = JsonLine()
                         .Add("teardown", ErrorName(d, torn))
                         .Add("context", ErrorName(d, rc))
                         .Add("allocated", static_cast<int>(again.items.size()))
                         .Add("refused", again.refused)
                         .AddRaw("refusals", again.RefusalsJson())
                         .Text();
    failed = failed || rc != CUDA_SUCCESS || again.unexpected;
    tally.Merge(std::move(again));
  }

  pid_t sleeper = -1;
  if (o.spawn_sleeper) {
    char sleep_path[] = "/bin/sleep";
    char seconds[] = "60";
    char* args[] = {sleep_path, seconds, nullptr};
    if (posix_spawn(&sleeper, sleep_path, nullptr, nullptr, args, environ) != 0) sleeper = -1;
    JsonLine().Add("event", "spawned").Add("pid", static_cast<int64_t>(sleeper)).Print();
  }

  if (o.hold_s > 0) {
    JsonLine()
        .Add("event", "holding")
        .Add("pid", static_cast<int64_t>(getpid()))
        .Add("allocated", allocated)
        .Add("refused", refused)
        .Add("bytes_obtained", bytes_obtained)
        .AddRaw("mem_held", mem_held)
        .Print();
  }

  std::string after_child;
  if (o.fork_child >= 0) {
    const pid_t child = fork();
    if (child == 0) RunForkedChild(d, o);
    int status = 0;
    if (child > 0) waitpid(child, &status, 0);
    const std::string how = child < 0           ? "fork failed"
                            : WIFEXITED(status) ? "exit " + std::to_string(WEXITSTATUS(status))
                                                : "signal " + std::to_string(WTERMSIG(status));
    JsonLine().Add("event", "child_exited").Add("status", how).Print();
    // The child's charges went with it: the parent can now take what the child held.
    Tally again;
    AllocateInto(d, allocator, o.fork_child, &again);
    after_child = JsonLine()
                      .Add("allocated", static_cast<int>(again.items.size()))
                      .Add("refused", again.refused)
                      .AddRaw("refusals", again.RefusalsJson())
                      .Text();
    failed = failed || again.unexpected;
    tally.Merge(std::move(again));
  }

  if (o.hold_s > 0) Hold(o.hold_s);
  const bool interrupted = g_stop.load();
  if (!FreeAll(allocator, &tally.items)) {
    Complain("freeing failed");
    failed = true;
  }
  if (sleeper > 0) {
    kill(sleeper, SIGKILL);
    waitpid(sleeper, nullptr, 0);
  }
  const std::string mem_after = MemInfo(d);
  if (s.pool) d.mem_pool_destroy(s.pool);
  if (s.stream) d.stream_destroy(s.stream);

  JsonLine result;
  result.Add("event", "result")
      .Add("app", app)
      .Add("pid", static_cast<int64_t>(getpid()))
      .Append(extra)
      .Add("api", o.api)
      .Add("chunk_bytes", o.chunk)
      .Add("item_bytes", ItemBytes(o, s))
      .Add("count", o.count)
      .Add("threads", o.threads)
      .Add("init", ErrorName(d, s.init))
      .Add("setup", ErrorName(d, s.setup))
      .Add("allocated", allocated)
      .Add("refused", refused);
  JsonLine refusals_json;
  for (const auto& [name, n] : refusals) refusals_json.Add(name, n);
  result.AddRaw("refusals", refusals_json.Text())
      .Add("bytes_obtained", bytes_obtained)
      .AddRaw("total_mem", total_rc == CUDA_SUCCESS ? std::to_string(total_mem) : Quote(ErrorName(d, total_rc)))
      .AddRaw("mem_before", mem_before)
      .AddRaw("mem_held", mem_held)
      .AddRaw("mem_after", mem_after)
      .AddRaw("refill", refill)
      .Add("interrupted", interrupted);
  if (!after_child.empty()) result.AddRaw("after_child", after_child);
  if (!after_teardown.empty()) result.AddRaw("after_teardown", after_teardown);
  // What the MPS client would read at the driver's initialisation (sharing mode mps).
  for (const char* name : {"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"}) {
    if (const char* value = getenv(name)) result.Add(name, std::string(value));
  }
  result.Print();
  if (s.setup != CUDA_SUCCESS) return kExitSetupFailed;
  return failed ? kExitDriverFailure : kExitOk;
}

}  // namespace gpuslice::testapp
