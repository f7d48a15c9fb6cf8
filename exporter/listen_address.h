// The exporter's --listen value: HOST:PORT, [IPv6]:PORT, or :PORT (every interface).
#pragma once

#include <string>

#include "common/status.h"

namespace gpuslice::exporter {

struct ListenAddress {
  std::string host;  // as bind(2) takes it: "127.0.0.1", "::1", "0.0.0.0"
  int port = 0;      // 1..65535
};

// The default: 127.0.0.1 and a port of gpuslice's own (not dcgm-exporter's 9400: both run on
// GPU nodes).
inline constexpr char kDefaultListen[] = "127.0.0.1:9457";

// An error (what is wrong and what would be valid) for anything else: no port, a port out of
// range, a URL, a host that is neither an address nor a name this machine resolves.
Result<ListenAddress> ParseListenAddress(const std::string& text);

// Binds a probe socket to `address` as the server will, to say why it cannot: "is in use by
// another process", "is not an address of this machine", "needs CAP_NET_BIND_SERVICE (ports
// below 1024)"; "" when it can.
std::string WhyCannotListen(const ListenAddress& address);

}  // namespace gpuslice::exporter
