// The compute scheduler's tests (tests/sched_*_test.cc): real gpuslice-workload processes,
// preloaded as tenants or unmanaged, over the test's own simulated GPU, measured against the
// simulator's per-process busy time through the fairness harness (tests/support/fairness_harness.h).
// Margins are loose enough for a noisy 2-core CI; the exact figures, and the targets, come from
// gpuslice-bench's scenarios (docs/benchmarks.md, docs/performance.md).
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "broker/compute_gate.h"
#include "tests/support/fairness_harness.h"
#include "tests/support/shim_fixture.h"

namespace gpuslice::testing {

using fairness::BusyFraction;
using fairness::Child;
using fairness::Jain;
using fairness::Sample;
using fairness::SharesBetween;
using fairness::SleepFor;
using fairness::StartOptions;

// A compute-bound tenant's workload: 1 ms kernels, two in flight, for longer than any test.
inline const std::vector<std::string> kComputeBound = {"compute", "--kernel-us", "1000", "--depth",
                                                       "2",       "--duration",  "120"};

// The workload's last {"event":"progress",...} line (run with --report-interval): its own count
// of kernels completed in the last window, as a busy fraction. Null when there is none.
inline fairness::Json LastProgress(const Child& child) {
  const std::string out = child.Stdout();
  const size_t at = out.rfind("\"event\":\"progress\"");
  if (at == std::string::npos) return nullptr;
  const size_t begin = out.rfind('\n', at), end = out.find('\n', at);
  const size_t from = begin == std::string::npos ? 0 : begin + 1;
  return fairness::Json::parse(out.substr(from, end == std::string::npos ? std::string::npos : end - from), nullptr,
                               false);
}

// "a=0.5012 b=0.4988" for failure messages.
inline std::string DescribeShares(const std::map<std::string, double>& shares) {
  std::string text;
  for (const auto& [tenant, share] : shares) text += tenant + "=" + std::to_string(share) + " ";
  return text;
}

class SchedTest : public ShimTest {
 public:
  fairness::Gpu& gpu() { return *gpu_; }

  static StartOptions Managed(int request_pct, int limit_pct = 0) {
    StartOptions o;
    o.request_pct = request_pct;
    o.limit_pct = limit_pct;
    return o;
  }
  static StartOptions Unmanaged() {
    StartOptions o;
    o.managed = false;
    return o;
  }

 protected:
  void SetUp() override {
    ShimTest::SetUp();
    gpu_ =
        std::make_unique<fairness::Gpu>(fairness::Paths{BinDir(), SimLibDir(), ShimPath()}, state_path(), state_dir());
  }
  void TearDown() override {
    gpu_.reset();  // kills what still runs
    ShimTest::TearDown();
  }

  // Starts a process of `tenant` and waits until its context is current; fails the test if not.
  Child* Start(const std::string& tenant, const std::vector<std::string>& args, const StartOptions& options) {
    Child* child = gpu_->StartReady(tenant, args, options);
    EXPECT_NE(child, nullptr) << tenant << " did not start";
    return child;
  }

  // The samples at the start and the end of `seconds` from now.
  std::pair<Sample, Sample> Measure(double seconds) {
    Sample a = gpu_->Take();
    SleepFor(seconds);
    return {a, gpu_->Take()};
  }

 private:
  std::unique_ptr<fairness::Gpu> gpu_;
};

}  // namespace gpuslice::testing
