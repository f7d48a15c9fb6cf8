#include "driver_state.h"

#include "sim/visible_units.h"

#include <pthread.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <new>
#include <vector>

namespace gpuslice::sim {
namespace {

std::mutex g_init_mutex;
std::atomic<Driver*> g_driver{nullptr};
CUresult g_init_error = CUDA_SUCCESS;  // a failed cuInit keeps failing the same way

// The calling thread's context stack (top = current) and its per-thread default streams. On the
// heap behind a pthread key, not in thread_local containers: glibc registers a thread_local's
// destructor with an allocation of its own and aborts the process when that fails, where this
// one throws std::bad_alloc, which the entry point answers with CUDA_ERROR_OUT_OF_MEMORY.
struct ThreadContexts {
  std::vector<CUctx_st*> stack;
  std::map<CUctx_st*, CUstream_st*> per_thread_streams;
};
pthread_key_t g_thread_contexts_key;                // its destructor frees a thread's at its exit
thread_local ThreadContexts* t_contexts = nullptr;  // trivially destructible: nothing registered

// At the thread's exit (on that thread): a call made later in its exit finds none, or makes one
// that glibc then frees too (it runs key destructors again while values are set).
void FreeThreadContexts(void* contexts) {
  t_contexts = nullptr;
  delete static_cast<ThreadContexts*>(contexts);
}

// The calling thread's, made at its first need.
ThreadContexts& Contexts() {
  if (!t_contexts) {
    auto made = std::make_unique<ThreadContexts>();
    if (pthread_setspecific(g_thread_contexts_key, made.get()) != 0) throw std::bad_alloc();
    t_contexts = made.release();
  }
  return *t_contexts;
}

// A fork() while another thread is in cuInit must not leave g_init_mutex locked for ever in the
// child (where that thread does not exist): fork() waits for the cuInit to finish, and the
// mutex is released on both sides after it.
void LockInitBeforeFork() { g_init_mutex.lock(); }
void UnlockInitInParent() { g_init_mutex.unlock(); }

void ForgetDriverInChild() {
  Driver* driver = g_driver.exchange(nullptr);
  // The child must re-run cuInit; it must not keep the parent's liveness lock open.
  if (driver) driver->state().CloseInheritedDescriptor();
  g_init_error = CUDA_SUCCESS;
  if (t_contexts) *t_contexts = ThreadContexts{};
  g_init_mutex.unlock();
}

// Registered when the library is loaded, before any cuInit: a fork() runs only the handlers
// registered when it began, so a registration in cuInit could come after a fork that had begun,
// and the cuInit would then hold g_init_mutex over that fork.
__attribute__((constructor)) void RegisterForkHandlers() {
  pthread_atfork(LockInitBeforeFork, UnlockInitInParent, ForgetDriverInChild);
  pthread_key_create(&g_thread_contexts_key, FreeThreadContexts);
}

__attribute__((destructor)) void ShutdownAtExit() {
  if (Driver* driver = g_driver.load()) driver->Shutdown();
}

}  // namespace

Driver* Driver::Get() { return g_driver.load(std::memory_order_acquire); }

CUresult Driver::Initialize(unsigned int flags) {
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (g_driver.load()) return CUDA_SUCCESS;
  std::lock_guard<std::mutex> lock(g_init_mutex);
  if (g_driver.load()) return CUDA_SUCCESS;
  if (g_init_error != CUDA_SUCCESS) return g_init_error;

  std::string error;
  SimConfig config;
  if (!LoadSimConfigFromEnv(&config, &error)) {
    std::fprintf(stderr, "%s\n", error.c_str());
    return g_init_error = CUDA_ERROR_NO_DEVICE;
  }
  auto state = SimState::OpenOrCreate(&error);
  if (!state) {
    std::fprintf(stderr, "%s\n", error.c_str());
    return g_init_error = CUDA_ERROR_NO_DEVICE;
  }
  const std::vector<int> units = VisibleUnits(state->segment(), std::getenv("CUDA_VISIBLE_DEVICES"));
  if (units.empty()) return g_init_error = CUDA_ERROR_NO_DEVICE;  // as CUDA does: nothing visible
  MpsClientSettings mps;
  if (!LoadMpsClientSettings(&mps, &error)) {
    std::fprintf(stderr, "%s\n", error.c_str());
    return g_init_error = CUDA_ERROR_NO_DEVICE;
  }
  const std::optional<int> slot = state->RegisterProcess();
  if (!slot) {
    std::fprintf(stderr, "gpuslice-sim: every process slot of %s is in use by a live process\n", state->path().c_str());
    return CUDA_ERROR_OPERATING_SYSTEM;
  }
  auto* driver = new Driver();
  driver->slot_ = *slot;
  driver->default_kernel_ns_ = config.default_kernel_ns;
  driver->mps_ = mps;
  driver->unit_count_ = static_cast<int>(std::min<size_t>(units.size(), kMaxDevices));
  for (int d = 0; d < driver->unit_count_; ++d) {
    driver->units_[d] = units[d];
    const int sm_cap = state->mps_enabled(units[d])
                           ? MpsSmCap(state->device(units[d]).config.sm_count, mps.active_thread_percentage)
                           : 0;
    driver->runners_[d] = std::make_unique<DeviceRunner>(state.get(), units[d], *slot, sm_cap);
    if (sm_cap > 0) driver->mps_faults_[d] = &state->segment().mps.devices[units[d]].fault_generation;
  }
  driver->state_ = std::move(state);
  g_driver.store(driver, std::memory_order_release);
  return CUDA_SUCCESS;
}

void Driver::Shutdown() {
  for (int d = 0; d < device_count(); ++d) runners_[d]->ReleaseDevice();
  state_->UnregisterProcess(slot_);
}

void Driver::Register(const void* handle) {
  std::lock_guard<std::mutex> lock(mutex_);
  handles_.insert(handle);
}

void Driver::Unregister(const void* handle) {
  std::lock_guard<std::mutex> lock(mutex_);
  handles_.erase(handle);
}

bool Driver::IsRegistered(const void* handle) {
  std::lock_guard<std::mutex> lock(mutex_);
  return handles_.count(handle) != 0;
}

CUresult Driver::ChargeDevice(int device, uint64_t bytes) {
  // An MPS client's pinned-memory limit is per CUDA ordinal, as CUDA_MPS_PINNED_DEVICE_MEM_LIMIT names them.
  const uint64_t own_limit = state_->mps_enabled(units_[device]) ? mps_.memory_limit[device] : 0;
  return state_->ChargeMemory(units_[device], slot_, bytes, own_limit) ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

void Driver::CreditDevice(int device, uint64_t bytes) { state_->CreditMemory(units_[device], slot_, bytes); }

CUresult Driver::AllocateDeviceMemory(int device, size_t size, AllocationKind kind, CUmemoryPool pool, CUdeviceptr* out,
                                      const CUctx_st* owner) {
  // Managed memory lives in host memory until touched on the device and may oversubscribe
  // the GPU, so it does not take device capacity here (docs/simulator.md).
  const uint64_t charged = kind == AllocationKind::kManaged ? 0 : ChargedBytes(size);
  if (charged && ChargeDevice(device, charged) != CUDA_SUCCESS) return CUDA_ERROR_OUT_OF_MEMORY;
  // Lazily committed host memory: a large allocation costs nothing until it is written.
  void* backing = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (backing == MAP_FAILED) {
    if (charged) CreditDevice(device, charged);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  Allocation a;
  a.base = reinterpret_cast<CUdeviceptr>(backing);
  a.size = size;
  a.charged = charged;
  a.device = device;
  a.kind = kind;
  a.pool = pool;
  a.context = owner;
  try {
    AddRange(a);
  } catch (...) {  // nothing kept: the error code says the memory was not allocated
    munmap(backing, size);
    if (charged) CreditDevice(device, charged);
    throw;
  }
  *out = a.base;
  return CUDA_SUCCESS;
}

CUresult Driver::FreeDeviceMemory(CUdeviceptr base, Allocation* freed) {
  Allocation a;
  if (!RemoveRange(base, &a)) return CUDA_ERROR_INVALID_VALUE;
  munmap(reinterpret_cast<void*>(a.base), a.size);
  if (a.charged) CreditDevice(a.device, a.charged);
  if (freed) *freed = a;
  return CUDA_SUCCESS;
}

CUresult Driver::MpsFaultSeen(CUctx_st* ctx) {
  if (mps_faults_[ctx->device]->load(std::memory_order_relaxed) == ctx->mps_faults_seen) return CUDA_SUCCESS;
  ctx->sticky_error->store(CUDA_ERROR_ILLEGAL_ADDRESS);
  return CUDA_ERROR_ILLEGAL_ADDRESS;
}

// Volta and later MPS contain a fatal fault to the clients of the GPU it happened on, and report
// it to every one of them (without saying which client caused it).
void Driver::Fault(CUctx_st* ctx) {
  ctx->sticky_error->store(CUDA_ERROR_ILLEGAL_ADDRESS);
  if (mps_faults_[ctx->device]) mps_faults_[ctx->device]->fetch_add(1);
}

void Driver::AddRange(const Allocation& allocation) {
  std::lock_guard<std::mutex> lock(mutex_);
  ranges_[allocation.base] = allocation;
}

bool Driver::RemoveRange(CUdeviceptr base, Allocation* removed) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = ranges_.find(base);
  if (it == ranges_.end()) return false;
  if (removed) *removed = it->second;
  ranges_.erase(it);
  return true;
}

bool Driver::FindRange(CUdeviceptr ptr, size_t bytes, Allocation* found) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = ranges_.upper_bound(ptr);
  if (it == ranges_.begin()) return false;
  --it;
  const Allocation& a = it->second;
  if (ptr < a.base || ptr - a.base > a.size || bytes > a.size - (ptr - a.base)) return false;
  if (found) *found = a;
  return true;
}

CUresult Driver::CreateContext(int device, unsigned int flags, bool primary, CUctx_st** out) {
  const uint64_t overhead = device_config(device).context_memory;
  if (overhead && ChargeDevice(device, overhead) != CUDA_SUCCESS) return CUDA_ERROR_OUT_OF_MEMORY;
  std::unique_ptr<CUctx_st> ctx;
  try {  // nothing kept on failure: no charge, no handle
    ctx = std::make_unique<CUctx_st>();
    if (mps_faults_[device]) ctx->mps_faults_seen = mps_faults_[device]->load();
    ctx->device = device;
    ctx->flags = flags;
    ctx->primary = primary;
    Register(ctx.get());
    try {
      ctx->legacy_stream = CreateStream(ctx.get(), 0, 0);
    } catch (...) {
      Unregister(ctx.get());
      throw;
    }
  } catch (...) {
    if (overhead) CreditDevice(device, overhead);
    throw;
  }
  state_->device(units_[device]).processes[slot_].contexts.fetch_add(1);
  *out = ctx.release();
  return CUDA_SUCCESS;
}

CUresult Driver::DestroyContext(CUctx_st* ctx) {
  // Both lists first: past them nothing allocates, so a failure (memory) leaves the context whole.
  std::vector<CUstream_st*> streams;
  {
    std::lock_guard<std::mutex> lock(ctx->mutex);
    streams = ctx->streams;
  }
  // What the context owns goes with it (gpuslice credits it then: docs/accounting.md).
  std::vector<Allocation> owned;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& [base, a] : ranges_)
      if (a.context == ctx) owned.push_back(a);
  }
  for (CUstream_st* s : streams) DestroyStream(s);
  for (const Allocation& a : owned) {
    if (a.kind == AllocationKind::kHost) {
      RemoveRange(a.base, nullptr);
      std::free(reinterpret_cast<void*>(a.base));
    } else {
      FreeDeviceMemory(a.base);
    }
  }
  DestroyArraysOfContext(this, ctx);
  Unregister(ctx);
  ForgetContextEverywhere(ctx);
  state_->device(units_[ctx->device]).processes[slot_].contexts.fetch_sub(1);
  const uint64_t overhead = device_config(ctx->device).context_memory;
  if (overhead) CreditDevice(ctx->device, overhead);
  delete ctx;
  return CUDA_SUCCESS;
}

CUctx_st* Driver::PrimaryContext(int device) {
  std::lock_guard<std::mutex> lock(g_init_mutex);
  if (!primary_[device]) {
    CUctx_st* ctx = nullptr;
    if (CreateContext(device, 0, true, &ctx) != CUDA_SUCCESS) return nullptr;
    primary_[device] = ctx;
  }
  return primary_[device];
}

CUstream_st* Driver::CreateStream(CUctx_st* ctx, unsigned int flags, int priority) {
  auto stream = std::make_unique<CUstream_st>();
  stream->context = ctx;
  stream->flags = flags;
  stream->priority = priority;
  stream->executor = std::make_shared<StreamExecutor>(&runner(ctx->device), ctx->sticky_error);
  {
    std::lock_guard<std::mutex> lock(ctx->mutex);
    ctx->streams.push_back(stream.get());
  }
  try {
    Register(stream.get());
  } catch (...) {  // not kept: the context must not destroy a stream nobody was given
    std::lock_guard<std::mutex> lock(ctx->mutex);
    auto& v = ctx->streams;
    v.erase(std::remove(v.begin(), v.end(), stream.get()), v.end());
    throw;
  }
  return stream.release();
}

void Driver::DestroyStream(CUstream_st* stream) {
  Unregister(stream);
  {
    std::lock_guard<std::mutex> lock(stream->context->mutex);
    auto& v = stream->context->streams;
    v.erase(std::remove(v.begin(), v.end(), stream), v.end());
  }
  // As documented for cuStreamDestroy: queued work still completes; the call does not wait
  // for the caller's sake, but the simulator's worker must finish before it is freed.
  stream->executor.reset();  // or later, by a context synchronisation still waiting for it
  delete stream;
}

CUstream_st* Driver::PerThreadStream(CUctx_st* ctx) {
  auto& streams = Contexts().per_thread_streams;
  auto it = streams.find(ctx);
  if (it != streams.end() && IsRegistered(it->second)) return it->second;
  CUstream_st* stream = CreateStream(ctx, CU_STREAM_NON_BLOCKING, 0);
  streams[ctx] = stream;
  return stream;
}

CUresult RequireInit(Driver** driver) {
  *driver = Driver::Get();
  return *driver ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED;
}

CUresult RequireContext(Driver** driver, CUctx_st** ctx) {
  if (CUresult rc = RequireInit(driver); rc != CUDA_SUCCESS) return rc;
  *ctx = CurrentContextOrNull();
  if (!*ctx || !(*driver)->IsRegistered(*ctx)) return CUDA_ERROR_INVALID_CONTEXT;
  return (*driver)->ContextError(*ctx);
}

CUresult RequireDevice(Driver** driver, CUdevice device) {
  if (CUresult rc = RequireInit(driver); rc != CUDA_SUCCESS) return rc;
  if (device < 0 || device >= (*driver)->device_count()) return CUDA_ERROR_INVALID_DEVICE;
  return CUDA_SUCCESS;
}

CUresult ResolveStream(CUstream stream, bool per_thread, CUstream_st** out) {
  Driver* driver = nullptr;
  CUctx_st* ctx = nullptr;
  if (CUresult rc = RequireContext(&driver, &ctx); rc != CUDA_SUCCESS) return rc;
  if (stream == CU_STREAM_PER_THREAD || (stream == nullptr && per_thread)) {
    *out = driver->PerThreadStream(ctx);
    return CUDA_SUCCESS;
  }
  if (stream == nullptr || stream == CU_STREAM_LEGACY) {
    *out = ctx->legacy_stream;
    return CUDA_SUCCESS;
  }
  if (!driver->IsRegistered(stream)) return CUDA_ERROR_INVALID_HANDLE;
  *out = stream;
  return CUDA_SUCCESS;
}

CUctx_st* CurrentContextOrNull() {
  return t_contexts && !t_contexts->stack.empty() ? t_contexts->stack.back() : nullptr;
}

void SetCurrentContext(CUctx_st* ctx) {
  std::vector<CUctx_st*>& stack = Contexts().stack;
  if (stack.empty()) {
    if (ctx) stack.push_back(ctx);
  } else if (ctx) {
    stack.back() = ctx;
  } else {
    stack.pop_back();
  }
}

void PushContext(CUctx_st* ctx) { Contexts().stack.push_back(ctx); }

CUctx_st* PopContext() {
  if (!t_contexts || t_contexts->stack.empty()) return nullptr;
  CUctx_st* top = t_contexts->stack.back();
  t_contexts->stack.pop_back();
  return top;
}

void ForgetContextEverywhere(CUctx_st* ctx) {
  // Other threads' stacks may still name it; RequireContext rejects unregistered contexts.
  if (!t_contexts) return;
  std::vector<CUctx_st*>& stack = t_contexts->stack;
  stack.erase(std::remove(stack.begin(), stack.end(), ctx), stack.end());
  t_contexts->per_thread_streams.erase(ctx);
}

}  // namespace gpuslice::sim
