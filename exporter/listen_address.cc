#include "exporter/listen_address.h"

#include <cctype>

namespace gpuslice::exporter {

std::optional<ListenAddress> ParseListenAddress(const std::string& text, std::string* error) {
  const std::string valid = " (expected HOST:PORT, [IPV6]:PORT or :PORT with a port of 1 to 65535, e.g. 127.0.0.1:9400)";
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos) {
    *error = "--listen '" + text + "' has no port" + valid;
    return std::nullopt;
  }
  ListenAddress address;
  address.host = text.substr(0, colon);
  if (address.host.size() >= 2 && address.host.front() == '[' && address.host.back() == ']') {
    address.host = address.host.substr(1, address.host.size() - 2);
  } else if (address.host.find(':') != std::string::npos) {
    *error = "--listen '" + text + "': an IPv6 address must be written in brackets" + valid;
    return std::nullopt;
  }
  if (address.host.empty()) address.host = "0.0.0.0";
  const std::string port = text.substr(colon + 1);
  bool digits = !port.empty() && port.size() <= 5;
  for (char c : port) digits = digits && std::isdigit(static_cast<unsigned char>(c));
  if (!digits || std::stoi(port) < 1 || std::stoi(port) > 65535) {
    *error = "--listen '" + text + "': '" + port + "' is not a port" + valid;
    return std::nullopt;
  }
  address.port = std::stoi(port);
  return address;
}

}  // namespace gpuslice::exporter
