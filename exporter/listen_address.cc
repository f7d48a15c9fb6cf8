#include "exporter/listen_address.h"

#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <memory>

#include "common/unique_fd.h"

namespace gpuslice::exporter {

Result<ListenAddress> ParseListenAddress(const std::string& text) {
  const std::string valid = std::string(" (expected HOST:PORT, [IPV6]:PORT or :PORT with a port of 1 to 65535, e.g. ") +
                            kDefaultListen + ")";
  if (text.find("://") != std::string::npos) {
    return Status::InvalidArgument("--listen '" + text + "' is a URL; give the address alone" + valid);
  }
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos) {
    return Status::InvalidArgument("--listen '" + text + "' has no port" + valid);
  }
  ListenAddress address;
  address.host = text.substr(0, colon);
  const bool bracketed = address.host.size() >= 2 && address.host.front() == '[' && address.host.back() == ']';
  if (bracketed) {
    address.host = address.host.substr(1, address.host.size() - 2);
  } else if (address.host.find(':') != std::string::npos) {
    return Status::InvalidArgument("--listen '" + text + "': an IPv6 address must be written in brackets" + valid);
  }
  if (address.host.empty()) address.host = "0.0.0.0";
  const std::string port = text.substr(colon + 1);
  bool digits = !port.empty() && port.size() <= 5;
  for (char c : port) digits = digits && std::isdigit(static_cast<unsigned char>(c));
  if (!digits || std::stoi(port) < 1 || std::stoi(port) > 65535) {
    return Status::InvalidArgument("--listen '" + text + "': '" + port + "' is not a port" + valid);
  }
  address.port = std::stoi(port);
  // 300.1.1.1 and typos are usage errors, found here rather than as a failure to listen.
  addrinfo hints{};
  hints.ai_family = bracketed ? AF_INET6 : AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  const int resolved = getaddrinfo(address.host.c_str(), nullptr, &hints, &found);
  if (found) freeaddrinfo(found);
  if (resolved != 0) {
    return Status::InvalidArgument("--listen '" + text + "': '" + address.host + "' is not an " +
                                   (bracketed ? "IPv6 " : "") + "address or a name this machine resolves (" +
                                   gai_strerror(resolved) + ")" + valid);
  }
  return address;
}

std::string WhyCannotListen(const ListenAddress& address) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  if (getaddrinfo(address.host.c_str(), std::to_string(address.port).c_str(), &hints, &found) != 0 || !found)
    return "does not resolve";
  const std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> owned(found, &freeaddrinfo);
  const UniqueFd fd(socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  std::string why;
  if (!fd.valid()) {
    why = std::string("cannot open a socket: ") + std::strerror(errno);
  } else {
    int yes = 1;
    setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);  // as the server binds
    if (bind(fd.get(), found->ai_addr, found->ai_addrlen) != 0) {
      const int e = errno;
      if (e == EADDRINUSE) why = "is in use by another process (another exporter, or dcgm-exporter on 9400?)";
      else if (e == EADDRNOTAVAIL) why = "is not an address of this machine";
      else if (e == EACCES) why = "needs CAP_NET_BIND_SERVICE (ports below 1024) or is not permitted";
      else why = std::strerror(e);
    }
  }
  return why;
}

}  // namespace gpuslice::exporter
