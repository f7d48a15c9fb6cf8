// Soak: random tenants on a node of two simulated GPUs for a while — processes that exit
// normally while a thread waits for the grant, SIGKILLs, SIGSTOP/SIGCONT, processes on two GPUs,
// memory holders over their quota, forks — then what a user would check: nothing is frozen (every
// process still running ends on SIGTERM within 2 s), every tenant's quota is exact against the
// simulator (a fresh process gets exactly its quota on each GPU: nothing leaked by the dead,
// nothing over), and no grant is stuck (two fresh tenants on each GPU both run).
//
// GPUSLICE_SOAK_SECONDS sets the length (CI: the default 20 s; by hand, minutes:
// GPUSLICE_SOAK_SECONDS=300 ctest -L soak). GPUSLICE_SOAK_SEED replays one run (the seed is
// printed).
#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <random>

#include "tests/support/sched_fixture.h"

namespace gpuslice::testing {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kTenants = 4;
constexpr int kMaxLive = 8;  // a 2-core machine: enough to contend, few enough to stay responsive
const std::string kQuota = "1Gi";

// Read when the program starts: each test's fixture clears every GPUSLICE_* variable (SimTest).
const char* const kSoakSecondsText = std::getenv("GPUSLICE_SOAK_SECONDS");
const char* const kSoakSeedText = std::getenv("GPUSLICE_SOAK_SEED");

double SoakSeconds() { return kSoakSecondsText ? std::max(1.0, std::atof(kSoakSecondsText)) : 20.0; }

class SoakDeploymentShapesTest : public SchedTest {
 protected:
  StartOptions Tenant(int t) const {
    StartOptions o = Managed(100 / kTenants);
    o.env = {"GPUSLICE_SIM_DEVICES=2", "GPUSLICE_MEMORY_LIMIT=" + kQuota, "GPUSLICE_TENANT=t" + std::to_string(t)};
    return o;
  }
  // The fork: a test app (not a workload) that allocates, forks a child that allocates too, and
  // holds; it inherits GPUSLICE_SIM_DEVICES from this process (SetEnv).
  void StartForker(int t) {
    forkers_.push_back(StartShimmed({App("direct"), "alloc", "--chunk", "64Mi", "--count", "2", "--fork-child", "1",
                                     "--child-hold", "1", "--hold", "2"},
                                    {"GPUSLICE_MEMORY_LIMIT=" + kQuota, "GPUSLICE_TENANT=t" + std::to_string(t)}));
  }

  std::vector<std::unique_ptr<Subprocess>> forkers_;
};

TEST_F(SoakDeploymentShapesTest, RandomTenantsLeaveNothingFrozenNoQuotaWrongAndNoGrantStuck) {
  SetEnv("GPUSLICE_SIM_DEVICES", "2");
  const unsigned seed = kSoakSeedText ? static_cast<unsigned>(std::strtoul(kSoakSeedText, nullptr, 10))
                                      : std::random_device{}();
  std::printf("soak: %.0f s, GPUSLICE_SOAK_SEED=%u\n", SoakSeconds(), seed);
  std::mt19937 rng(seed);
  const auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };

  std::vector<Child*> live;
  std::vector<Child*> stopped;
  int started = 0, exits = 0, kills = 0, stops = 0, forks = 0;
  const auto deadline = Clock::now() + std::chrono::duration<double>(SoakSeconds());
  auto next_progress = Clock::now() + std::chrono::seconds(10);
  while (Clock::now() < deadline) {
    std::erase_if(live, [](Child* c) { return !c->running(); });
    const int t = pick(kTenants);
    const std::string device = std::to_string(pick(2));
    const std::string other = device == "0" ? "1" : "0";
    switch (pick(7)) {
      case 0:  // a long compute-bound process; half of them first launch on the other GPU
      case 1: {
        if (static_cast<int>(live.size()) >= kMaxLive) break;
        std::vector<std::string> args = {"compute", "--kernel-us", std::to_string(500 + pick(8) * 1000),
                                         "--depth", "2",           "--duration",
                                         "600",     "--device",    device};
        if (pick(2)) args.insert(args.end(), {"--first-on-device", other});
        live.push_back(gpu().Start("t" + std::to_string(t), args, Tenant(t)));
        ++started;
        break;
      }
      case 2: {  // a process that exits normally while its launching thread may wait
        if (static_cast<int>(live.size()) >= kMaxLive) break;
        gpu().Start("t" + std::to_string(t),
                    {"compute", "--kernel-us", "1000", "--depth", "2", "--duration", "60", "--device", device,
                     "--exit-after", std::to_string(0.2 + pick(6) * 0.1)},
                    Tenant(t));
        ++exits;
        break;
      }
      case 3:  // SIGKILL, whatever it was doing
        if (!live.empty()) {
          const int i = pick(static_cast<int>(live.size()));
          live[i]->Kill(SIGKILL);
          live.erase(live.begin() + i);
          ++kills;
        }
        break;
      case 4:  // SIGSTOP, continued a little later
        if (!live.empty() && stopped.size() < 2) {
          Child* c = live[pick(static_cast<int>(live.size()))];
          c->Kill(SIGSTOP);
          stopped.push_back(c);
          ++stops;
        } else if (!stopped.empty()) {
          stopped.front()->Kill(SIGCONT);
          stopped.erase(stopped.begin());
        }
        break;
      case 5:  // memory over the quota, held a while
        gpu().Start("t" + std::to_string(t),
                    {"memory", "--chunk", "256Mi", "--count", "5", "--hold", "1", "--device", device}, Tenant(t));
        break;
      case 6:
        StartForker(t);
        ++forks;
        break;
    }
    if (Clock::now() >= next_progress) {
      std::printf("soak: %d started, %d exits mid-wait, %d kills, %d stops, %d forks so far\n", started, exits, kills,
                  stops, forks);
      next_progress += std::chrono::seconds(10);
    }
    SleepFor(0.1 + pick(4) * 0.1);
  }
  for (Child* c : stopped) c->Kill(SIGCONT);
  std::printf("soak: %d started, %d exits mid-wait, %d kills, %d stops, %d forks\n", started, exits, kills, stops,
              forks);

  // Nothing frozen: every long-running process still alive ends on SIGTERM within 2 s.
  std::erase_if(live, [](Child* c) { return !c->running(); });
  for (Child* c : live) c->Kill(SIGTERM);
  for (Child* c : live) {
    const auto start = Clock::now();
    const int code = c->Wait(2000);
    EXPECT_EQ(code, 0) << "pid " << c->pid() << " did not end on SIGTERM within 2 s (took "
                       << std::chrono::duration<double>(Clock::now() - start).count() << " s)\n"
                       << c->Stderr();
  }
  gpu().StopAll(5000);  // the short-lived ones (memory holders, leavers) end on their own
  for (auto& f : forkers_) f->Wait(10000);

  // Every quota exact: on each GPU a fresh process of each tenant gets 4 chunks of 256 MiB of its
  // 1 GiB and the fifth is refused — the dead returned everything, nobody holds more.
  for (int t = 0; t < kTenants; ++t) {
    for (const char* device : {"0", "1"}) {
      const Json result = gpu().RunToEnd("t" + std::to_string(t),
                                         {"memory", "--chunk", "256Mi", "--count", "5", "--device", device}, Tenant(t));
      ASSERT_FALSE(result.is_null()) << "t" << t << " on GPU " << device;
      EXPECT_EQ(result.value("allocated", -1), 4) << "t" << t << " on GPU " << device << ": " << result.dump();
      EXPECT_EQ(result.value("refused", -1), 1) << "t" << t << " on GPU " << device << ": " << result.dump();
    }
  }

  // No grant stuck: two fresh tenants on each GPU both run (by their own count of completed
  // kernels: the simulator's busy time is under-counted after processes exited inside a kernel).
  for (const char* device : {"0", "1"}) {
    std::vector<std::string> args = kComputeBound;
    args.insert(args.end(), {"--device", device, "--report-interval", "0.5"});
    Child* a = gpu().StartReady("fresh-a", args, Tenant(0));
    Child* b = gpu().StartReady("fresh-b", args, Tenant(1));
    ASSERT_TRUE(a && b) << "GPU " << device;
    SleepFor(1.6);
    EXPECT_GE(LastProgress(*a).value("busy_fraction", 0.0), 0.2) << "GPU " << device << ": " << a->Stdout();
    EXPECT_GE(LastProgress(*b).value("busy_fraction", 0.0), 0.2) << "GPU " << device << ": " << b->Stdout();
    gpu().StopAll(5000);
  }
}

}  // namespace
}  // namespace gpuslice::testing
