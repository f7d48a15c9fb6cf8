// Byte counts and shares as operators read them. Binary units throughout, because the driver,
// nvidia-smi and GPUSLICE_MEMORY_LIMIT's "Mi"/"Gi" all count in powers of 1024.
#pragma once

#include <cstdint>
#include <string>

namespace gpuslice::ctl {

// "0 B", "512 B", "256 MiB", "1.5 GiB", "74.51 GiB": the largest unit that keeps the value at or
// above 1, at most two decimals, trailing zeros dropped (so exact quotas read as typed: "1 GiB").
std::string FormatBytes(uint64_t bytes);

// part as a percentage of whole, one decimal ("50.0%"); "-" when whole is 0.
std::string FormatPercent(uint64_t part, uint64_t whole);

// part / whole * 100 without overflow for any 64-bit values; 0 when whole is 0.
double Percent(uint64_t part, uint64_t whole);

}  // namespace gpuslice::ctl
