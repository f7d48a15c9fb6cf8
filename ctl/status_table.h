// `gpuslicectl status` for people: one block per GPU, a row per tenant and, indented beneath it,
// a row per process, then the GPU's quota commitment.
#pragma once

#include <string>

#include "broker/broker.h"

namespace gpuslice::ctl {

// The snapshot as text, ending in a newline. Expects SortForDisplay to have run.
std::string RenderStatusTable(const broker::Snapshot& snapshot);

}  // namespace gpuslice::ctl
