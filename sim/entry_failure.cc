#include "sim/entry_failure.h"

#include <cxxabi.h>

#include <cstdio>
#include <exception>
#include <new>
#include <system_error>

namespace gpuslice::sim {

EntryFailure CurrentEntryFailure(const char* entry) {
  try {
    throw;
  } catch (abi::__forced_unwind&) {
    throw;
  } catch (const std::bad_alloc& e) {
    std::fprintf(stderr, "gpuslice-sim: %s: out of memory (%s); it returns an error\n", entry, e.what());
    return EntryFailure::kOutOfMemory;
  } catch (const std::system_error& e) {
    std::fprintf(stderr, "gpuslice-sim: %s: the system refused (%s); it returns an error\n", entry, e.what());
    return EntryFailure::kOperatingSystem;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpuslice-sim: %s: %s; it returns an error\n", entry, e.what());
    return EntryFailure::kOther;
  } catch (...) {
    std::fprintf(stderr, "gpuslice-sim: %s: an exception of unknown type; it returns an error\n", entry);
    return EntryFailure::kOther;
  }
}

}  // namespace gpuslice::sim
