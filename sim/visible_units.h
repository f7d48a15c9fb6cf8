// Which simulated devices a process's CUDA enumerates, as the real driver decides from
// CUDA_VISIBLE_DEVICES (docs/simulator.md, MIG):
// - unset: every device in order; a device in MIG mode is replaced by its first MIG instance;
// - a comma-separated list of ordinals, GPU-<uuid> and MIG-<uuid> (unique prefixes allowed):
//   those, in that order; an entry that names nothing ends the list there, as CUDA does;
//   an ordinal or GPU UUID of a device in MIG mode stands for its first instance;
// - whatever the list, one process enumerates at most one MIG instance (CUDA 11/12 enumerate a
//   single MIG device per process); later MIG entries are skipped.
#pragma once

#include <string>
#include <vector>

#include "sim/sim_state_layout.h"

namespace gpuslice::sim {

// Units (SimState::unit indexes) in CUDA ordinal order. `visible` is CUDA_VISIBLE_DEVICES or
// nullptr when unset.
std::vector<int> VisibleUnits(const SimSegment& segment, const char* visible);

}  // namespace gpuslice::sim
