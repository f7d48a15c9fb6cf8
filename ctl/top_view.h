// What `gpuslicectl top` draws: per GPU its policy and grant, then a row per active tenant with
// its memory against its quota, its compute request against the share it got, its wait for the
// grant (p99 from the broker's histogram) and its refused allocations. Sorted by a key, and cut
// into pages that fit the terminal, each page repeating its GPU's header and the column
// headings, so that they are always on screen. Nothing is cut to fit: a header too long for the
// terminal goes on over lines, and a tenant name longer than its column has a line of its own.
#pragma once

#include <cstdint>
#include <string>

#include "broker/snapshot.h"
#include "ctl/status_device.h"

namespace gpuslice::ctl {

// The 99th percentile of a tenant's waits for the grant, as the histogram's bucket bound
// ("<= 5 ms", "> 10 s"); "-" before its first wait.
std::string WaitP99(const broker::TenantView& tenant);

enum class TopSort { kMemory, kShare, kWaits, kName };
const char* TopSortName(TopSort sort);  // "memory", "share", "waits", "name"
TopSort NextTopSort(TopSort sort);      // the order `s` cycles through

struct TopLayout {
  int width = 0;   // terminal columns; under 110 the compact rows (at most 80 columns), 0: wide
  int height = 0;  // rows for the tenants' lines, headers included; 0: one page of everything
  TopSort sort = TopSort::kName;
  int page = 0;  // clamped to the last page
};

struct TopFrame {
  std::string text;
  int page = 0;   // the page drawn
  int pages = 1;  // how many there are
};

// The frame for `now`. With `previous` (the snapshot of the last refresh) HELD is the share of
// the GPU's time each tenant got since then; without it (--once), the share of the last complete
// window (as gpuslicectl status), "-" before there is one.
// `devices` (NVML's, when it answers) adds each GPU's busy figure to its header, the same as
// gpuslicectl status's and the exporter's (ctl/status_device.h).
TopFrame RenderTop(const broker::Snapshot& now, const broker::Snapshot* previous, const TopLayout& layout = {},
                   const DeviceFiguresByUuid* devices = nullptr);

}  // namespace gpuslice::ctl
