// GPUSLICE_SIM_PROC_ADDRESS=internal: cuGetProcAddress hands out internal entry points of the
// library — functions with the exported function's signature that forward to it, but are not
// the exported symbol — as some real drivers do. An interposer that recognises the driver's
// answers only by comparing them with dlsym() of the exports misses every one of them; gpuslice
// must then find its hook by the version rule (docs/interposition.md). Read per process.
#pragma once

namespace gpuslice::sim {

enum class ProcAddressMode { kExports, kInternal, kInvalid };

// The mode of this process, from GPUSLICE_SIM_PROC_ADDRESS (unset, "" or "exports": the
// exported functions; "internal": internal entry points). An invalid value prints one line
// naming the variable, the value and the valid ones (once) and gives kInvalid.
ProcAddressMode CurrentProcAddressMode();

// The internal entry point that forwards to `exported`, this library's function named `name`;
// nullptr when `name` is not an export name of cudaTypedefs.h that cuda.h declares.
void* InternalEntryPoint(const char* name, void* exported);

}  // namespace gpuslice::sim
