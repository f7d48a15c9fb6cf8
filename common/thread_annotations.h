// Clang's thread-safety attributes (https://clang.llvm.org/docs/ThreadSafetyAnalysis.html): a
// member says which mutex guards it, a function which mutexes it needs or takes, and
// `clang++ -Wthread-safety` rejects an access without the lock (scripts/check-thread-safety.sh).
// Under any other compiler they expand to nothing: GCC builds the product, Clang checks it.
// Each is defined only if not yet: abseil (under gRPC) defines some of them the same way.
#pragma once

#if defined(__clang__)
#define GPUSLICE_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define GPUSLICE_THREAD_ANNOTATION(x)
#endif

// A class whose objects are locks (common/mutex.h), or that holds one for its lifetime
// (common/mutex_lock.h).
#ifndef CAPABILITY
#define CAPABILITY(name) GPUSLICE_THREAD_ANNOTATION(capability(name))
#endif
#ifndef SCOPED_CAPABILITY
#define SCOPED_CAPABILITY GPUSLICE_THREAD_ANNOTATION(scoped_lockable)
#endif

// Data: read and written only with the mutex held (GUARDED_BY), or the data a pointer points
// to (PT_GUARDED_BY; the pointer itself is not guarded).
#ifndef GUARDED_BY
#define GUARDED_BY(x) GPUSLICE_THREAD_ANNOTATION(guarded_by(x))
#endif
#ifndef PT_GUARDED_BY
#define PT_GUARDED_BY(x) GPUSLICE_THREAD_ANNOTATION(pt_guarded_by(x))
#endif

// Lock order, for a mutex taken while another is held (checked only with -Wthread-safety-beta).
#ifndef ACQUIRED_BEFORE
#define ACQUIRED_BEFORE(...) GPUSLICE_THREAD_ANNOTATION(acquired_before(__VA_ARGS__))
#endif
#ifndef ACQUIRED_AFTER
#define ACQUIRED_AFTER(...) GPUSLICE_THREAD_ANNOTATION(acquired_after(__VA_ARGS__))
#endif

// Functions: the caller must hold (REQUIRES) or must not hold (EXCLUDES) the mutexes.
#ifndef REQUIRES
#define REQUIRES(...) GPUSLICE_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#endif
#ifndef REQUIRES_SHARED
#define REQUIRES_SHARED(...) GPUSLICE_THREAD_ANNOTATION(requires_shared_capability(__VA_ARGS__))
#endif
#ifndef EXCLUDES
#define EXCLUDES(...) GPUSLICE_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#endif

// Functions that take or drop a mutex and leave it so (no arguments: `this`).
#ifndef ACQUIRE
#define ACQUIRE(...) GPUSLICE_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#endif
#ifndef ACQUIRE_SHARED
#define ACQUIRE_SHARED(...) GPUSLICE_THREAD_ANNOTATION(acquire_shared_capability(__VA_ARGS__))
#endif
#ifndef RELEASE
#define RELEASE(...) GPUSLICE_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#endif
#ifndef RELEASE_SHARED
#define RELEASE_SHARED(...) GPUSLICE_THREAD_ANNOTATION(release_shared_capability(__VA_ARGS__))
#endif
#ifndef RELEASE_GENERIC
#define RELEASE_GENERIC(...) GPUSLICE_THREAD_ANNOTATION(release_generic_capability(__VA_ARGS__))
#endif
// Takes the mutex when it returns the first argument.
#ifndef TRY_ACQUIRE
#define TRY_ACQUIRE(...) GPUSLICE_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
#endif
#ifndef TRY_ACQUIRE_SHARED
#define TRY_ACQUIRE_SHARED(...) GPUSLICE_THREAD_ANNOTATION(try_acquire_shared_capability(__VA_ARGS__))
#endif

// A run-time check that the mutex is held; the analysis then takes it as held.
#ifndef ASSERT_CAPABILITY
#define ASSERT_CAPABILITY(x) GPUSLICE_THREAD_ANNOTATION(assert_capability(x))
#endif
#ifndef ASSERT_SHARED_CAPABILITY
#define ASSERT_SHARED_CAPABILITY(x) GPUSLICE_THREAD_ANNOTATION(assert_shared_capability(x))
#endif

// A function that returns a reference to the mutex named.
#ifndef RETURN_CAPABILITY
#define RETURN_CAPABILITY(x) GPUSLICE_THREAD_ANNOTATION(lock_returned(x))
#endif

// The function is not checked. Each use says why beside it.
#ifndef NO_THREAD_SAFETY_ANALYSIS
#define NO_THREAD_SAFETY_ANALYSIS GPUSLICE_THREAD_ANNOTATION(no_thread_safety_analysis)
#endif
