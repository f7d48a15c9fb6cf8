// What `gpuslicectl top` draws: per GPU its policy and grant, then a row per active tenant with
// its memory against its quota (a bar), its compute request against the share it got, its wait
// for the grant (p99 from the broker's histogram) and its refused allocations.
#pragma once

#include <cstdint>
#include <string>

#include "broker/broker.h"

namespace gpuslice::ctl {

// The 99th percentile of a tenant's waits for the grant, as the histogram's bucket bound
// ("<= 5 ms", "> 1 s"); "-" before its first wait.
std::string WaitP99(const broker::TenantView& tenant);

// The screen for `now`. With `previous` (the snapshot of the last refresh) SHARE is the share of
// the GPU's time each tenant got since then; without it (--once), the share of the last complete
// window (as gpuslicectl status), "-" before there is one.
std::string RenderTop(const broker::Snapshot& now, const broker::Snapshot* previous);

}  // namespace gpuslice::ctl
