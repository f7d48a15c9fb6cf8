#include "exporter/http_server.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <map>
#include <thread>
#include <utility>

#include "common/clock.h"
#include "common/cond_var.h"
#include "common/mutex.h"
#include "common/mutex_lock.h"
#include "common/thread_annotations.h"
#include "common/unique_fd.h"

namespace gpuslice::exporter {
namespace {

uint64_t NowMs() { return MonotonicNanos() / 1'000'000; }

const char* Reason(int status) {
  switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 431: return "Request Header Fields Too Large";
    case 503: return "Service Unavailable";
  }
  return "Error";
}

HttpResponse Plain(int status, const std::string& text) {
  HttpResponse response;
  response.status = status;
  response.body = text + "\n";
  return response;
}

// The bytes on the wire; HEAD gets the head alone, with the length the body would have.
std::string Serialise(const HttpResponse& response, bool head_only, bool keep_alive) {
  std::string out = "HTTP/1.1 " + std::to_string(response.status) + " " + Reason(response.status) + "\r\n";
  out += "Content-Type: " + response.content_type + "\r\n";
  out += "Content-Length: " + std::to_string(response.body.size()) + "\r\n";
  for (const auto& [name, value] : response.headers) out += name + ": " + value + "\r\n";
  out += keep_alive ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n";
  if (!head_only) out += response.body;
  return out;
}

enum class Phase { kHead, kRendering, kWriting };

struct Connection {
  UniqueFd fd;
  Phase phase = Phase::kHead;
  uint64_t deadline_ms = 0;    // of the head being read, or of the answer being written
  uint64_t head_since_ms = 0;  // when it began waiting for this head (eviction order)
  std::string in;              // bytes of the head read so far (and any pipelined after it)
  std::string out;             // the answer being written
  size_t written = 0;
  bool keep_alive = false;  // after this answer
  bool head_only = false;
  bool peer_closed = false;  // it sent its last byte: no further head will come
};

struct Job {
  uint64_t connection;
  RequestHead request;
  const HttpHandler* handler;
};

struct Done {
  uint64_t connection;
  HttpResponse response;
};

}  // namespace

struct HttpServer::State {
  struct RouteEntry {
    HttpHandler handler;
    bool slow;
  };
  std::map<std::string, RouteEntry> routes;
  UniqueFd listener;
  UniqueFd wake{eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)};
  std::atomic<bool> stopping{false};
  std::map<uint64_t, Connection> connections;  // the serving thread's own
  uint64_t next_id = 1;

  Mutex mutex;
  CondVar work;
  std::deque<Job> jobs GUARDED_BY(mutex);
  std::deque<Done> done GUARDED_BY(mutex);
  size_t pending GUARDED_BY(mutex) = 0;  // jobs queued or being rendered
  bool workers_stop GUARDED_BY(mutex) = false;

  void Wake() {
    const uint64_t one = 1;
    (void)!write(wake.get(), &one, sizeof one);
  }
  void Worker();
  void Accept();
  void Dispatch(uint64_t id, Connection& c);
  void Respond(Connection& c, HttpResponse response, bool keep_alive);
  void ReadHead(uint64_t id, Connection& c);
  bool WriteSome(Connection& c);  // false: the connection is finished
  void CollectDone();
  void EvictOneWaitingForAHead();
};

void HttpServer::State::Worker() {
  while (true) {
    Job job;
    {
      MutexLock lock(&mutex);
      while (jobs.empty() && !workers_stop)
        work.WaitFor(&mutex, std::chrono::seconds(1),
                     [this]() REQUIRES(mutex) { return !jobs.empty() || workers_stop; });
      if (workers_stop) return;
      job = std::move(jobs.front());
      jobs.pop_front();
    }
    HttpResponse response;
    try {
      response = (*job.handler)(job.request);
    } catch (...) {
      response = Plain(503, "the page could not be rendered (out of memory)");
    }
    {
      MutexLock lock(&mutex);
      done.push_back({job.connection, std::move(response)});
      --pending;
    }
    Wake();
  }
}

void HttpServer::State::EvictOneWaitingForAHead() {
  auto oldest = connections.end();
  for (auto it = connections.begin(); it != connections.end(); ++it)
    if (it->second.phase == Phase::kHead &&
        (oldest == connections.end() || it->second.head_since_ms < oldest->second.head_since_ms))
      oldest = it;
  if (oldest != connections.end()) connections.erase(oldest);
}

void HttpServer::State::Accept() {
  // Every pending connection, until accept would block.
  while (true) {
    UniqueFd fd(accept4(listener.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!fd.valid()) return;
    if (static_cast<int>(connections.size()) >= kMaxConnections) EvictOneWaitingForAHead();
    if (static_cast<int>(connections.size()) >= kMaxConnections) {
      // Every slot is rendering or writing: told so at once, never left in the backlog.
      const std::string busy = Serialise(Plain(503, "too many connections"), false, false);
      (void)!send(fd.get(), busy.data(), busy.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      continue;
    }
    // The answer's last segment is sent at once rather than after the client's delayed ACK.
    int yes = 1;
    setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);
    Connection c;
    c.fd = std::move(fd);
    c.head_since_ms = NowMs();
    c.deadline_ms = c.head_since_ms + kHeadDeadlineMs;
    connections.emplace(next_id++, std::move(c));
  }
}

void HttpServer::State::Respond(Connection& c, HttpResponse response, bool keep_alive) {
  c.keep_alive = keep_alive && !c.peer_closed;
  c.out = Serialise(response, c.head_only, keep_alive);
  c.written = 0;
  c.phase = Phase::kWriting;
  c.deadline_ms = NowMs() + kWriteDeadlineMs;
}

// A complete head is at the start of c.in: answered at once, or queued for a worker.
void HttpServer::State::Dispatch(uint64_t id, Connection& c) {
  RequestHead request;
  size_t head_bytes = 0;
  switch (ParseRequestHead(c.in, &request, &head_bytes)) {
    case HeadState::kIncomplete: return;
    case HeadState::kTooLarge: return Respond(c, Plain(431, "request head over 8 KiB"), false);
    case HeadState::kMalformed: return Respond(c, Plain(400, "not an HTTP/1.x request head"), false);
    case HeadState::kComplete: break;
  }
  c.in.erase(0, head_bytes);
  c.head_only = request.method == "HEAD";
  // No route takes a body: one announced would have to be read past, so the connection ends.
  if (request.has_body) return Respond(c, Plain(400, "a request body is not accepted"), false);
  if (request.method != "GET" && request.method != "HEAD") {
    HttpResponse refused = Plain(405, "only GET and HEAD");
    refused.headers.push_back({"Allow", "GET, HEAD"});
    return Respond(c, std::move(refused), request.keep_alive);
  }
  const auto route = routes.find(request.path);
  if (route == routes.end())
    return Respond(c, Plain(404, "not found: /metrics and /healthz are served"), request.keep_alive);
  if (!route->second.slow) {
    HttpResponse answer;
    try {
      answer = route->second.handler(request);
    } catch (...) {  // out of memory: this request fails, the server goes on
      answer = Plain(503, "the answer could not be made (out of memory)");
    }
    return Respond(c, std::move(answer), request.keep_alive);
  }
  const bool keep_alive = request.keep_alive;
  bool queued = false;
  {
    MutexLock lock(&mutex);
    if (pending < static_cast<size_t>(kMaxQueuedRenders)) {
      ++pending;
      jobs.push_back({id, std::move(request), &route->second.handler});
      queued = true;
    }
  }
  if (!queued) return Respond(c, Plain(503, "too many scrapes at once"), false);
  c.keep_alive = keep_alive && !c.peer_closed;
  c.phase = Phase::kRendering;
  work.SignalAll();
}

void HttpServer::State::ReadHead(uint64_t id, Connection& c) {
  char buffer[4096];
  while (c.in.size() < kMaxRequestHead) {
    // Never more than the head may hold: a larger one is refused once this much has come.
    const size_t room = std::min(sizeof buffer, kMaxRequestHead - c.in.size());
    const ssize_t n = recv(c.fd.get(), buffer, room, 0);
    if (n > 0) {
      c.in.append(buffer, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    // The client closed its side (or failed): a head it sent before is still answered, once.
    c.peer_closed = true;
    break;
  }
  Dispatch(id, c);
  if (c.peer_closed && c.phase == Phase::kHead) c.phase = Phase::kWriting, c.out.clear(), c.keep_alive = false;
}

bool HttpServer::State::WriteSome(Connection& c) {
  while (c.written < c.out.size()) {
    const ssize_t n = send(c.fd.get(), c.out.data() + c.written, c.out.size() - c.written, MSG_NOSIGNAL);
    if (n > 0) {
      c.written += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    return false;
  }
  if (!c.keep_alive) return false;
  c.out.clear();
  c.written = 0;
  c.phase = Phase::kHead;
  c.head_since_ms = NowMs();
  c.deadline_ms = c.head_since_ms + kHeadDeadlineMs;
  return true;
}

void HttpServer::State::CollectDone() {
  uint64_t count;
  (void)!read(wake.get(), &count, sizeof count);
  std::deque<Done> finished;
  {
    MutexLock lock(&mutex);
    finished.swap(done);
  }
  for (Done& d : finished) {
    const auto it = connections.find(d.connection);
    if (it == connections.end()) continue;  // closed meanwhile
    Respond(it->second, std::move(d.response), it->second.keep_alive);
  }
}

HttpServer::HttpServer() : state_(std::make_unique<State>()) {}
HttpServer::~HttpServer() = default;

void HttpServer::Route(const std::string& path, HttpHandler handler, bool slow) {
  state_->routes[path] = {std::move(handler), slow};
}

Status HttpServer::Bind(const ListenAddress& address) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  if (getaddrinfo(address.host.c_str(), std::to_string(address.port).c_str(), &hints, &found) != 0 || !found)
    return Status::Error("does not resolve");
  const std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> owned(found, &freeaddrinfo);
  UniqueFd fd(socket(found->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return Status::Error(std::string("cannot open a socket: ") + std::strerror(errno));
  int yes = 1;
  setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  if (bind(fd.get(), found->ai_addr, found->ai_addrlen) != 0 || listen(fd.get(), 128) != 0)
    return Status::Error(std::strerror(errno));
  state_->listener = std::move(fd);
  return Status::Ok();
}

Status HttpServer::Serve() {
  State& s = *state_;
  std::vector<std::thread> workers;
  for (int i = 0; i < kWorkers; ++i) workers.emplace_back([&s] { s.Worker(); });
  std::vector<pollfd> fds;
  std::vector<uint64_t> ids;
  Status failure = Status::Ok();
  while (!s.stopping.load()) {
    fds.clear();
    ids.clear();
    fds.push_back({s.wake.get(), POLLIN, 0});
    fds.push_back({s.listener.get(), POLLIN, 0});
    uint64_t next_deadline = UINT64_MAX;
    for (auto& [id, c] : s.connections) {
      if (c.phase == Phase::kRendering) continue;
      fds.push_back({c.fd.get(), static_cast<short>(c.phase == Phase::kHead ? POLLIN : POLLOUT), 0});
      ids.push_back(id);
      next_deadline = std::min(next_deadline, c.deadline_ms);
    }
    const uint64_t now = NowMs();
    const int timeout = next_deadline == UINT64_MAX
                            ? 1000
                            : static_cast<int>(std::min<uint64_t>(1000, next_deadline > now ? next_deadline - now : 0));
    if (poll(fds.data(), fds.size(), timeout) < 0 && errno != EINTR) {
      failure = Status::Error(std::string("cannot wait for connections: ") + std::strerror(errno));
      break;
    }
    if (fds[0].revents) s.CollectDone();
    for (size_t i = 2; i < fds.size(); ++i) {
      const auto it = s.connections.find(ids[i - 2]);
      if (it == s.connections.end() || !fds[i].revents) continue;
      Connection& c = it->second;
      if (c.phase == Phase::kHead) s.ReadHead(it->first, c);
      // Written at once when answered without a worker (and after a read found the peer gone).
      if (c.phase == Phase::kWriting && !s.WriteSome(c)) s.connections.erase(it);
      else if (c.phase == Phase::kHead && !c.in.empty()) s.Dispatch(it->first, c);  // a pipelined head
    }
    // Newly answered connections, and those past their deadline.
    const uint64_t after = NowMs();
    for (auto it = s.connections.begin(); it != s.connections.end();) {
      Connection& c = it->second;
      if (c.phase != Phase::kRendering && after >= c.deadline_ms) {
        if (c.phase == Phase::kHead && !c.in.empty()) {
          // Best effort, never waited for: the client is told before the connection ends.
          const std::string timeout_answer = Serialise(Plain(408, "request head not complete in 10 s"), false, false);
          (void)!send(c.fd.get(), timeout_answer.data(), timeout_answer.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
        }
        it = s.connections.erase(it);
        continue;
      }
      ++it;
    }
    if (fds[1].revents) s.Accept();
  }
  {
    MutexLock lock(&s.mutex);
    s.workers_stop = true;
  }
  s.work.SignalAll();
  for (std::thread& worker : workers) worker.join();
  s.connections.clear();
  s.listener.reset();
  return failure;
}

void HttpServer::Stop() {
  state_->stopping.store(true);
  state_->Wake();
}

}  // namespace gpuslice::exporter
