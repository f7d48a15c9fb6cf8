// Byte counts and shares as operators read them. Binary units throughout, because the driver,
// nvidia-smi and GPUSLICE_MEMORY_LIMIT's "Mi"/"Gi" all count in powers of 1024.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace gpuslice::ctl {

// "0 B", "512 B", "256 MiB", "1.5 GiB", "74.51 GiB": the largest unit that keeps the value at or
// above 1, at most two decimals, trailing zeros dropped (so exact quotas read as typed: "1 GiB").
std::string FormatBytes(uint64_t bytes);

// part as a percentage of whole, one decimal ("50.0%"); "-" when whole is 0.
std::string FormatPercent(uint64_t part, uint64_t whole);

// part / whole * 100 without overflow for any 64-bit values; 0 when whole is 0.
double Percent(uint64_t part, uint64_t whole);

// Durations as operators type them: a decimal number and a unit, ns, us (or µs), ms or s, with
// or without a space between: "10ms", "500us", "0.05s", "2.5 ms". False for anything else (no
// unit, a sign, an exponent, a value past 2^64-1 ns); digits below a nanosecond are dropped.
bool ParseDuration(std::string_view text, uint64_t* ns);

// "10 ms", "500 us", "1 s", "2.5 ms": the largest unit that keeps the value at or above 1, at
// most three decimals, trailing zeros dropped.
std::string FormatDuration(uint64_t ns);

}  // namespace gpuslice::ctl
