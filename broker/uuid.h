// GPU UUIDs as nvidia-smi prints them, the broker's key for a GPU.
#pragma once

#include <cstdint>
#include <string>

namespace gpuslice::broker {

// "GPU-xxxxxxxx-xxxx-..." <-> 16 bytes.
std::string FormatUuid(const uint8_t (&uuid)[16]);
bool ParseUuid(const std::string& text, uint8_t (&uuid)[16]);

}  // namespace gpuslice::broker
