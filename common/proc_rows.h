// The rows of cuGetProcAddress's version rule, generated from cudaTypedefs.h
// (tools/gen_proc_table.py into proc_table.inc, sorted by base name then version): for each
// (base name, version), the export it resolves to and its per-thread twin ("" when none). Read by
// the shim's interposer and by gpuslice-proc-rule-check, which checks them against a driver.
// (The simulator keeps a copy of its own: it is what the rule is checked on.) Test programs that
// walk the table read it here too.
#pragma once

namespace gpuslice {

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

}  // namespace gpuslice
