// The exporter's tests (tests/exporter_*_test.cc): a gpuslice-exporter process over the test's
// broker state directory and simulated GPU, plain HTTP GETs of it, and a real Prometheus server
// (Debian's `prometheus`) that scrapes it every second and answers PromQL over its HTTP API.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/find_program.h"
#include "tests/support/subprocess.h"
#include "tests/support/test_env.h"

namespace gpuslice::testing {

// A loopback TCP port nobody listens on now (the kernel's choice of an ephemeral one).
inline int FreeLoopbackPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0)
    port = ntohs(address.sin_port);
  close(fd);
  return port;
}

// GET http://127.0.0.1:port/path: the body, or nullopt when nothing answered 200.
inline std::optional<std::string> HttpGet(int port, const std::string& path) {
  httplib::Client client("127.0.0.1", port);
  client.set_connection_timeout(2);
  client.set_read_timeout(5);
  auto response = client.Get(path.c_str());
  if (!response || response->status != 200) return std::nullopt;
  return response->body;
}

// Where the tests' device plugin writes its pods file, and their exporter reads it: beside the
// state directory, not in it (tenants can write the state directory).
inline std::string TestPodsFile(const std::string& state_dir) {
  return std::filesystem::path(state_dir).parent_path().string() + "/pods.json";
}

// gpuslice-exporter on a free loopback port, reading `state_dir` (and TestPodsFile of it), with
// the simulated NVML.
class Exporter {
 public:
  Exporter(const std::string& state_dir, const std::string& sim_state) : port_(FreeLoopbackPort()) {
    process_ = std::make_unique<Subprocess>(
        std::vector<std::string>{BinDir() + "/gpuslice-exporter", "--listen", "127.0.0.1:" + std::to_string(port_),
                                 "--state-dir", state_dir, "--pods-file", TestPodsFile(state_dir)},
        std::vector<std::string>{"LD_LIBRARY_PATH=" + SimLibDir(), "GPUSLICE_SIM_STATE=" + sim_state},
        Inherit::kAllButGpuslice);
  }
  int port() const { return port_; }
  Subprocess& process() { return *process_; }
  // Waits until /healthz answers.
  bool WaitServing(int timeout_ms = 10000) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (std::chrono::steady_clock::now() < deadline) {
      if (HttpGet(port_, "/healthz")) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }
  std::optional<std::string> Metrics() { return HttpGet(port_, "/metrics"); }

 private:
  int port_;
  std::unique_ptr<Subprocess> process_;
};

// A Prometheus server on a free loopback port, scraping one target every second, its data in a
// directory of its own (removed afterwards).
class Prometheus {
 public:
  static std::string Binary() { return FindProgram("prometheus"); }

  // Scrapes the exporter on `target_port` every second; evaluates `rules_file` (a rules file such
  // as deploy/prometheus/gpuslice-alerts.yaml) every second when given.
  explicit Prometheus(int target_port, const std::string& rules_file = "") : port_(FreeLoopbackPort()) {
    char pattern[] = "/tmp/gpuslice-prometheus-XXXXXX";
    dir_ = mkdtemp(pattern) ? pattern : "/tmp/gpuslice-prometheus-fallback";
    std::ofstream config(dir_ + "/prometheus.yml");
    config << "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n"
           << "scrape_configs:\n  - job_name: gpuslice\n    static_configs:\n"
           << "      - targets: ['127.0.0.1:" << target_port << "']\n";
    if (!rules_file.empty()) config << "rule_files: ['" << rules_file << "']\n";
    config.close();
    process_ = std::make_unique<Subprocess>(
        std::vector<std::string>{Binary(), "--config.file=" + dir_ + "/prometheus.yml",
                                 "--storage.tsdb.path=" + dir_ + "/data",
                                 "--web.listen-address=127.0.0.1:" + std::to_string(port_), "--log.level=warn"});
  }
  ~Prometheus() {
    process_.reset();
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  int port() const { return port_; }
  std::string Log() const { return process_->StdoutSoFar() + process_->StderrSoFar(); }

  // An instant query: the result vector ([] when the query matches nothing), null on an error.
  nlohmann::json Query(const std::string& promql) const {
    httplib::Client client("127.0.0.1", port_);
    client.set_connection_timeout(2);
    client.set_read_timeout(5);
    auto response = client.Get("/api/v1/query", httplib::Params{{"query", promql}}, httplib::Headers{});
    if (!response || response->status != 200) return nullptr;
    const auto body = nlohmann::json::parse(response->body, nullptr, false);
    if (body.is_discarded() || body.value("status", "") != "success") return nullptr;
    return body["data"]["result"];
  }

  // The value of the one series `promql` selects whose labels include `labels`; nullopt if none.
  std::optional<double> Value(const std::string& promql, const std::map<std::string, std::string>& labels = {}) const {
    const nlohmann::json result = Query(promql);
    if (!result.is_array()) return std::nullopt;
    for (const auto& series : result) {
      bool match = true;
      for (const auto& [name, value] : labels) match = match && series["metric"].value(name, "") == value;
      if (match) return std::stod(series["value"][1].get<std::string>());
    }
    return std::nullopt;
  }

 private:
  int port_;
  std::string dir_;
  std::unique_ptr<Subprocess> process_;
};

}  // namespace gpuslice::testing
