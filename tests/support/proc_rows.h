// The rows of the generated cuGetProcAddress table (sim/generated/proc_table.inc, from
// tools/gen_proc_table.py): which export name the version rule gives for (base, version), and
// its per-thread twin ("" when none). For test programs that walk the table.
#pragma once

namespace gpuslice::testing {

struct ProcRow {
  const char* base;
  int version;
  const char* name;
  const char* per_thread_name;
};

inline constexpr ProcRow kProcRows[] = {
#define GPUSLICE_PROC(base, version, name, per_thread_name, pfn) {base, version, name, per_thread_name},
#include "proc_table.inc"
#undef GPUSLICE_PROC
};

}  // namespace gpuslice::testing
