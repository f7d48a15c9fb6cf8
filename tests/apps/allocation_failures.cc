#include "tests/apps/allocation_failures.h"

#include <dlfcn.h>
#include <pthread.h>

#include <atomic>
#include <cerrno>
#include <cstddef>

extern "C" {
void* __libc_malloc(size_t size);
void* __libc_calloc(size_t count, size_t size);
void* __libc_realloc(void* old, size_t size);
void* __libc_memalign(size_t alignment, size_t size);
}

namespace gpuslice::testapp {
namespace {

std::atomic<int64_t> g_left{-1};  // allocations still allowed; -1: not armed
std::atomic<bool> g_threads_refused{false};
std::atomic<int64_t> g_refused{0};

using CreateThread = int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);
CreateThread g_create_thread = nullptr;

// Resolved before main, never while armed (dlsym may allocate).
__attribute__((constructor)) void FindCreateThread() {
  g_create_thread = reinterpret_cast<CreateThread>(dlsym(RTLD_NEXT, "pthread_create"));
}

bool Refuse() {
  int64_t left = g_left.load(std::memory_order_relaxed);
  while (left > 0 && !g_left.compare_exchange_weak(left, left - 1, std::memory_order_relaxed)) {
  }
  if (left != 0) return false;
  g_refused.fetch_add(1, std::memory_order_relaxed);
  errno = ENOMEM;
  return true;
}

}  // namespace

void FailAllocationsAfter(int64_t after) {
  g_refused.store(0);
  g_left.store(after);
}
void FailThreadCreation(bool fail) { g_threads_refused.store(fail); }
void Disarm() {
  g_left.store(-1);
  g_threads_refused.store(false);
}
int64_t Refused() { return g_refused.load(); }

}  // namespace gpuslice::testapp

using gpuslice::testapp::Refuse;

// Exported (the project builds with hidden visibility): they replace the C library's for the
// libraries of the process.
#pragma GCC visibility push(default)
extern "C" {

void* malloc(size_t size) { return Refuse() ? nullptr : __libc_malloc(size); }
void* calloc(size_t count, size_t size) { return Refuse() ? nullptr : __libc_calloc(count, size); }
void* realloc(void* old, size_t size) { return Refuse() ? nullptr : __libc_realloc(old, size); }
void* memalign(size_t alignment, size_t size) { return Refuse() ? nullptr : __libc_memalign(alignment, size); }
void* aligned_alloc(size_t alignment, size_t size) { return memalign(alignment, size); }
int posix_memalign(void** out, size_t alignment, size_t size) {
  if (Refuse()) return ENOMEM;
  *out = __libc_memalign(alignment, size);
  return *out ? 0 : ENOMEM;
}

int pthread_create(pthread_t* thread, const pthread_attr_t* attributes, void* (*start)(void*), void* argument) {
  if (gpuslice::testapp::g_threads_refused.load()) {
    gpuslice::testapp::g_refused.fetch_add(1);
    return EAGAIN;
  }
  return gpuslice::testapp::g_create_thread(thread, attributes, start, argument);
}

}  // extern "C"
#pragma GCC visibility pop
