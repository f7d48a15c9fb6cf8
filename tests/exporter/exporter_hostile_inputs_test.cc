// What anyone can put in front of gpuslice-exporter and `gpuslicectl status` must not bring them
// down: a pods file that is a FIFO, a symbolic link, tens of megabytes of pod name or of '[', or
// one in the state directory (which every tenant writes); clients that trickle their request a
// byte at a time, or send a quarter of a gigabyte of header. Each case once took the exporter (or
// status) down: a FIFO blocked status for ever and a scrape thread per scrape (after two, /metrics
// and /healthz were dead, and SIGTERM was ignored); a symbolic link was followed; a 10 MB pod name
// made a 325 MB page; two slow clients silenced the two-thread server; a 256 MB header was
// buffered before the 400.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "broker/broker.h"
#include "tests/support/broker_test_util.h"
#include "tests/support/exporter_fixture.h"

namespace gpuslice::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using Clock = std::chrono::steady_clock;

// A raw loopback connection (the tests' clients misbehave on purpose); -1 when refused.
int Connect(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// The exporter's peak resident memory, from /proc.
uint64_t PeakRssKiB(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);)
    if (line.starts_with("VmHWM:")) return std::stoull(line.substr(6));
  return 0;
}

class ExporterHostileInputsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    broker_ = ValueOf(broker::Broker::Attach(dir_.state_dir()));
    ASSERT_TRUE(broker_);
    ASSERT_TRUE(IsOk(broker_->Register("team-a")));
    ASSERT_TRUE(IsOk(broker_->OpenLedger(kTestUuid, kTestGpuTotal, 64 * kMiB)));
  }
  std::string pods_file() const { return TestPodsFile(dir_.state_dir()); }
  ProcessResult Status() {
    return gpuslice::testing::Run({BinDir() + "/gpuslicectl", "status", "--state-dir", dir_.state_dir(), "--pods-file",
                                   pods_file()},
                                  {}, 20000);
  }
  // The plugin's map, naming team-a's pod.
  void WriteGoodPodsFile(const std::string& path) {
    std::ofstream(path) << R"({"tenants": {"team-a": {"namespace": "ns", "pod": "trainer", "container": "c0"}}})";
  }

  BrokerTempDir dir_;
  std::unique_ptr<broker::Broker> broker_;
};

TEST_F(ExporterHostileInputsTest, AFifoAsThePodsFileBlocksNeitherStatusNorScrapesNorSigterm) {
  ASSERT_EQ(mkfifo(pods_file().c_str(), 0644), 0);
  auto start = Clock::now();
  const ProcessResult status = Status();
  EXPECT_LT(SecondsSince(start), 5);
  EXPECT_EQ(status.exit_code, 0) << status.err;
  EXPECT_THAT(status.out, HasSubstr("team-a"));
  EXPECT_THAT(status.err, HasSubstr("is not a regular file")) << status.err;

  Exporter exporter(dir_.state_dir(), dir_.root() + "/no-sim-state");
  ASSERT_TRUE(exporter.WaitServing()) << exporter.process().StderrSoFar();
  for (int scrape = 0; scrape < 4; ++scrape) {
    start = Clock::now();
    const auto page = exporter.Metrics();
    ASSERT_TRUE(page.has_value()) << "scrape " << scrape << " got no answer";
    EXPECT_LT(SecondsSince(start), 2) << "scrape " << scrape;
    EXPECT_THAT(*page, HasSubstr("tenant=\"team-a\",namespace=\"\",pod=\"\",container=\"\""));
  }
  EXPECT_EQ(HttpGet(exporter.port(), "/healthz"), "ok\n");
  // The FIFO replaced by the plugin's file: the pod is named at the next scrape.
  std::filesystem::remove(pods_file());
  WriteGoodPodsFile(pods_file());
  EXPECT_THAT(exporter.Metrics().value_or(""), HasSubstr("tenant=\"team-a\",namespace=\"ns\",pod=\"trainer\""));
  // Said once, not at every scrape.
  const std::string log = exporter.process().StderrSoFar();
  EXPECT_EQ(log.find("is not a regular file"), log.rfind("is not a regular file")) << log;
  start = Clock::now();
  exporter.process().Kill(SIGTERM);
  EXPECT_EQ(exporter.process().Wait(10000).exit_code, 0);
  EXPECT_LT(SecondsSince(start), 3) << "SIGTERM ends it at once";
}

// The state file replaced by a FIFO (anyone who can write the state directory can): refused as not
// a regular file, at once; the exporter's read-only open waited for a writer for ever.
TEST_F(ExporterHostileInputsTest, AFifoAsTheStateFileIsRefusedAtOnce) {
  broker_.reset();
  ASSERT_EQ(unlink(dir_.state_file().c_str()), 0);
  ASSERT_EQ(mkfifo(dir_.state_file().c_str(), 0660), 0);
  auto start = Clock::now();
  const ProcessResult status = Status();
  EXPECT_LT(SecondsSince(start), 5);
  EXPECT_EQ(status.exit_code, 1) << status.err;
  EXPECT_THAT(status.err, HasSubstr("it is not a regular file")) << status.err;
  Exporter exporter(dir_.state_dir(), dir_.root() + "/no-sim-state");
  ASSERT_TRUE(exporter.WaitServing()) << exporter.process().StderrSoFar();
  for (int scrape = 0; scrape < 3; ++scrape) {
    start = Clock::now();
    EXPECT_THAT(exporter.Metrics().value_or(""), HasSubstr("\ngpuslice_segment_up 0\n")) << "scrape " << scrape;
    EXPECT_LT(SecondsSince(start), 2);
  }
  exporter.process().Kill(SIGTERM);
  EXPECT_EQ(exporter.process().Wait(10000).exit_code, 0);
}

TEST_F(ExporterHostileInputsTest, ASymbolicLinkAsThePodsFileIsNotFollowed) {
  const std::string target = dir_.root() + "/elsewhere.json";
  WriteGoodPodsFile(target);
  ASSERT_EQ(symlink(target.c_str(), pods_file().c_str()), 0);
  const ProcessResult status = Status();
  EXPECT_EQ(status.exit_code, 0) << status.err;
  EXPECT_THAT(status.out, Not(HasSubstr("pod ns/trainer")));
  EXPECT_THAT(status.err, HasSubstr("is a symbolic link, which is not followed")) << status.err;
  // The control: the same file in its place names the pod.
  std::filesystem::remove(pods_file());
  std::filesystem::copy_file(target, pods_file());
  EXPECT_THAT(Status().out, HasSubstr("pod ns/trainer/c0"));
}

TEST_F(ExporterHostileInputsTest, HugeOrDeeplyNestedPodsFilesAreRefusedAtOnce) {
  Exporter exporter(dir_.state_dir(), dir_.root() + "/no-sim-state");
  ASSERT_TRUE(exporter.WaitServing()) << exporter.process().StderrSoFar();
  const std::string huge_name(10 << 20, 'x');
  const std::vector<std::pair<std::string, std::string>> files = {
      {"a 10 MB pod name", R"({"tenants": {"team-a": {"namespace": "ns", "pod": ")" + huge_name + R"("}}})"},
      {"50 MB of [", std::string(50 << 20, '[')},
      {"512 KiB of [ (under the size bound)", std::string(512 << 10, '[')},
      {"a pod name over 253 bytes", R"({"tenants": {"team-a": {"pod": ")" + std::string(254, 'p') + R"("}}})"}};
  for (const auto& [what, text] : files) {
    std::filesystem::remove(pods_file());
    std::ofstream(pods_file()) << text;
    auto start = Clock::now();
    const ProcessResult status = Status();
    EXPECT_LT(SecondsSince(start), 3) << what;
    EXPECT_EQ(status.exit_code, 0) << what << ": " << status.err;
    EXPECT_THAT(status.out, Not(HasSubstr("pod ns/"))) << what;
    EXPECT_FALSE(status.err.empty()) << what << ": the refusal is said";
    start = Clock::now();
    const std::string page = exporter.Metrics().value_or("");
    EXPECT_LT(SecondsSince(start), 2) << what;
    EXPECT_THAT(page, HasSubstr("tenant=\"team-a\",namespace=\"\",pod=\"\"")) << what;
    EXPECT_LT(page.size(), 64u << 10) << what;
  }
}

// Every tenant's container mounts the state directory read-write: a pods.json there is anyone's.
TEST_F(ExporterHostileInputsTest, ANamesFileInTheStateDirectoryOrWritableByOthersNamesNoPod) {
  std::ofstream(dir_.state_dir() + "/pods.json")
      << R"({"tenants": {"team-a": {"namespace": "evil", "pod": "relabelled", "container": "c"}}})";
  EXPECT_THAT(Status().out, Not(HasSubstr("relabelled")));
  WriteGoodPodsFile(pods_file());
  ASSERT_EQ(chmod(pods_file().c_str(), 0666), 0);
  const ProcessResult writable = Status();
  EXPECT_THAT(writable.out, Not(HasSubstr("pod ns/trainer")));
  EXPECT_THAT(writable.err, HasSubstr("is writable by others (mode 0666)")) << writable.err;
  ASSERT_EQ(chmod(pods_file().c_str(), 0644), 0);
  EXPECT_THAT(Status().out, HasSubstr("pod ns/trainer/c0")) << "the control: the plugin's own file";
}

// Clients that send a byte of their request every half second hold a connection each; the
// exporter answers its scraper beside two hundred of them.
TEST_F(ExporterHostileInputsTest, TwoHundredSlowClientsDoNotSilenceIt) {
  Exporter exporter(dir_.state_dir(), dir_.root() + "/no-sim-state");
  ASSERT_TRUE(exporter.WaitServing()) << exporter.process().StderrSoFar();
  std::vector<int> slow;
  for (int i = 0; i < 200; ++i) {
    const int fd = Connect(exporter.port());
    if (fd >= 0) slow.push_back(fd);
  }
  std::atomic<bool> done{false};
  std::thread trickle([&] {
    const std::string request = "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: ";
    for (size_t at = 0; !done.load(); ++at) {
      for (int fd : slow) (void)!send(fd, &request[at % request.size()], 1, MSG_NOSIGNAL | MSG_DONTWAIT);
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
  });
  std::this_thread::sleep_for(std::chrono::seconds(1));
  int answered = 0;
  for (int scrape = 0; scrape < 10; ++scrape) {
    const auto start = Clock::now();
    if (exporter.Metrics().has_value() && SecondsSince(start) < 3) ++answered;
  }
  done.store(true);
  trickle.join();
  for (int fd : slow) close(fd);
  EXPECT_EQ(answered, 10) << "scrapes answered within 3 s beside 200 slow clients";
}

TEST_F(ExporterHostileInputsTest, AHugeHeaderIsRefusedWithoutBeingBuffered) {
  Exporter exporter(dir_.state_dir(), dir_.root() + "/no-sim-state");
  ASSERT_TRUE(exporter.WaitServing()) << exporter.process().StderrSoFar();
  timeval timeout{5, 0};
  // A head of exactly the bound, not ended: refused at once with 431 (it is read whole, so the
  // answer is not lost to a reset).
  int fd = Connect(exporter.port());
  ASSERT_GE(fd, 0);
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  const std::string start = "GET /metrics HTTP/1.1\r\nX-Huge: ";
  const std::string head = start + std::string(8192 - start.size(), 'h');
  ASSERT_EQ(send(fd, head.data(), head.size(), MSG_NOSIGNAL), static_cast<ssize_t>(head.size()));
  const auto asked = Clock::now();
  char answer[64] = {};
  const ssize_t got = recv(fd, answer, sizeof answer - 1, 0);
  close(fd);
  EXPECT_GT(got, 0);
  EXPECT_THAT(std::string(answer), HasSubstr("HTTP/1.1 431")) << answer;
  EXPECT_LT(SecondsSince(asked), 1);
  // A quarter of a gigabyte of it: the exporter stops reading after the bound; its memory stays.
  const uint64_t before = PeakRssKiB(exporter.process().pid());
  fd = Connect(exporter.port());
  ASSERT_GE(fd, 0);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
  const std::string chunk = start + std::string(1 << 20, 'h');
  size_t sent = 0;
  for (int i = 0; i < 256; ++i) {  // 256 MiB unless the exporter stops reading
    const ssize_t n = send(fd, chunk.data(), chunk.size(), MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += static_cast<size_t>(n);
  }
  close(fd);
  const uint64_t after = PeakRssKiB(exporter.process().pid());
  std::printf("sent %zu bytes before the exporter stopped reading; peak RSS %lu -> %lu KiB\n", sent, before, after);
  EXPECT_LT(sent, 64u << 20) << "the exporter kept reading the header";
  EXPECT_LT(after, before + 4 * 1024) << "the header was buffered";
  EXPECT_EQ(HttpGet(exporter.port(), "/healthz"), "ok\n");
}

TEST(ExporterDaemonSetExample, ListensOnThePodsOwnAddressOnly) {
  std::ifstream in(SourceDir() + "/deploy/kubernetes/base/exporter.yaml");
  const std::string text((std::istreambuf_iterator<char>(in)), {});
  EXPECT_THAT(text, HasSubstr(R"("--listen", "$(POD_IP):9457")"));
  EXPECT_THAT(text, HasSubstr("fieldPath: status.podIP"));
  EXPECT_THAT(text, Not(HasSubstr(R"("--listen", ":9457")"))) << "every address of the pod";
}

}  // namespace
}  // namespace gpuslice::testing
