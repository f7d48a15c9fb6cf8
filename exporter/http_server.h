// gpuslice-exporter's HTTP/1.1 server: GET and HEAD of a few paths, keep-alive, nothing else. It is
// written for clients that may be slow or hostile, since anyone who reaches the port can connect:
//
//   - one thread reads every connection's request head, without blocking, within a deadline
//     (kHeadDeadlineMs from the connection's start or its last answer) and a size
//     (kMaxRequestHead): a client that trickles a byte a second, or sends a gigabyte of header,
//     holds only a connection slot, and only for that long;
//   - a connection slot is taken from the client that has waited longest without completing its
//     head when all kMaxConnections are in use, so a scraper always gets in;
//   - the answers of slow routes (/metrics) are computed by a pool of workers that never touch a
//     socket; the same thread writes every answer without blocking, within kWriteDeadlineMs;
//   - Stop() (SIGTERM) ends it within a render: no thread waits on a client.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "exporter/http_request.h"
#include "exporter/listen_address.h"

namespace gpuslice::exporter {

inline constexpr int kHeadDeadlineMs = 10'000;
inline constexpr int kWriteDeadlineMs = 60'000;
inline constexpr int kMaxConnections = 256;
inline constexpr int kWorkers = 2;
inline constexpr int kMaxQueuedRenders = 32;  // beyond this, 503 at once

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::vector<std::pair<std::string, std::string>> headers;  // beyond type, length, connection
  std::string body;
};

using HttpHandler = std::function<HttpResponse(const RequestHead& request)>;

class HttpServer {
 public:
  HttpServer();
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Before Listen. `slow`: computed on a worker (it reads files, NVML, the segment); otherwise
  // answered at once by the connection thread (/healthz must answer while renders queue).
  void Route(const std::string& path, HttpHandler handler, bool slow);

  // Binds and listens (SO_REUSEADDR only: a second exporter on the port fails instead of sharing
  // it); an error of one line when it cannot.
  Status Bind(const ListenAddress& address);
  // Serves until Stop(); returns once every thread has ended. An error only when the server
  // cannot wait for its sockets any more (poll fails).
  Status Serve();
  // Safe from any thread (a signal-waiting one), before or during Serve.
  void Stop();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace gpuslice::exporter
