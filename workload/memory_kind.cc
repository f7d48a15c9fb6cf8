// memory: `count` allocations of `chunk` through one API, held for `hold` seconds, then freed.
// Refused allocations are the measurement (a limit at work), so they end the run normally.
#include <map>
#include <string>
#include <vector>

#include "workload/allocators.h"
#include "workload/exit_codes.h"
#include "workload/kinds.h"
#include "workload/session.h"
#include "workload/stop_signal.h"

namespace gpuslice::workload {
namespace {

bool MemInfo(const Session& s, Json* out) {
  size_t free_bytes = 0, total_bytes = 0;
  if (!DRIVER_CALL(s, cuMemGetInfo, &free_bytes, &total_bytes)) return false;
  *out = Json{{"free", free_bytes}, {"total", total_bytes}};
  return true;
}

}  // namespace

int RunMemory(const CommonOptions& common, const MemoryOptions& options) {
  if (options.api == MemoryApi::kArray && options.chunk_bytes > kMaxArrayBytes) {
    ReportError("--api array takes a --chunk of at most 4Gi (65536 rows of 64Ki)");
    return kExitUsage;
  }
  Session s("memory", common);
  if (const int rc = s.Open(); rc != kExitOk) return rc;
  CUstream stream = nullptr;
  if (!DRIVER_CALL(s, cuStreamCreate, &stream, CU_STREAM_NON_BLOCKING)) return kExitDriverFailed;
  const auto allocator = MakeAllocator(options.api, s, stream);
  if (!allocator->Prepare()) return kExitDriverFailed;

  Json before, held, after;
  if (!MemInfo(s, &before)) return kExitDriverFailed;
  std::vector<Allocation> obtained;
  std::map<std::string, uint64_t> refusals;  // CUresult name -> how many
  uint64_t bytes_obtained = 0, refused = 0;
  bool interrupted = false;
  for (uint64_t i = 0; i < options.count; ++i) {
    if (StopRequested()) {
      interrupted = true;
      break;
    }
    Allocation a;
    CUresult refusal = CUDA_SUCCESS;
    switch (allocator->Allocate(options.chunk_bytes, &a, &refusal)) {
      case Outcome::kFailed: return kExitDriverFailed;
      case Outcome::kRefused:
        ++refused;
        ++refusals[s.driver().ErrorName(refusal)];
        continue;
      case Outcome::kObtained:
        obtained.push_back(a);
        bytes_obtained += a.bytes;
        if (options.touch && !allocator->Touch(a)) return kExitDriverFailed;
        break;
    }
  }
  if (!MemInfo(s, &held)) return kExitDriverFailed;

  if (options.hold_s > 0 && !interrupted) {
    s.Emit("holding", Json{{"allocated", obtained.size()},
                           {"refused", refused},
                           {"refusals", refusals},
                           {"bytes_obtained", bytes_obtained},
                           {"mem_held", held},
                           {"hold_s", options.hold_s}});
    interrupted = !SleepUntil(Clock::now() + Seconds(options.hold_s));
  }
  for (auto it = obtained.rbegin(); it != obtained.rend(); ++it) {
    if (!allocator->Free(*it)) return kExitDriverFailed;
  }
  if (!allocator->Finish()) return kExitDriverFailed;
  if (!MemInfo(s, &after)) return kExitDriverFailed;
  DRIVER_CALL(s, cuStreamDestroy, stream);

  Json result = {{"device", common.device},
                 {"api", MemoryApiName(options.api)},
                 {"chunk_bytes", options.chunk_bytes},
                 {"count", options.count},
                 {"touch", options.touch},
                 {"hold_s", options.hold_s},
                 {"allocated", obtained.size()},
                 {"refused", refused},
                 {"refusals", refusals},
                 {"bytes_obtained", bytes_obtained},
                 {"mem_before", before},
                 {"mem_held", held},
                 {"mem_after", after},
                 {"interrupted", interrupted}};
  s.Emit("result", result);
  return kExitOk;
}

}  // namespace gpuslice::workload
