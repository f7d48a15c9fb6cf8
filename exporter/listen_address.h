// The exporter's --listen value: HOST:PORT, [IPv6]:PORT, or :PORT (every interface).
#pragma once

#include <optional>
#include <string>

namespace gpuslice::exporter {

struct ListenAddress {
  std::string host;  // as bind(2) takes it: "127.0.0.1", "::1", "0.0.0.0"
  int port = 0;      // 1..65535
};

// nullopt and *error (what is wrong and what would be valid) for anything else.
std::optional<ListenAddress> ParseListenAddress(const std::string& text, std::string* error);

}  // namespace gpuslice::exporter
