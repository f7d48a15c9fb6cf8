// The alerting rules shipped in deploy/prometheus/ are valid (`promtool check rules`) and each
// behaves as its case in gpuslice-alerts.test.yaml says (`promtool test rules`): among them, a
// tenant refused before its first scrape fires only because the exporter shows its counters at 0
// first (the case without that 0 fires nothing). Skipped only without promtool
// (scripts/install-deps.sh installs it; CI has it).
#include <gtest/gtest.h>

#include "tests/support/find_program.h"
#include "tests/support/subprocess.h"
#include "tests/support/test_env.h"

namespace gpuslice::testing {
namespace {

TEST(ExporterRulesTest, ShippedRulesAreValidAndEveryCasePasses) {
  const std::string promtool = FindProgram("promtool");
  if (promtool.empty()) GTEST_SKIP() << "promtool is not installed (scripts/install-deps.sh installs it)";
  const std::string dir = SourceDir() + "/deploy/prometheus";
  const ProcessResult check = gpuslice::testing::Run({promtool, "check", "rules", dir + "/gpuslice-alerts.yaml"});
  EXPECT_EQ(check.exit_code, 0) << check.out << check.err;
  EXPECT_NE(check.out.find("SUCCESS: 4 rules found"), std::string::npos) << check.out;
  // promtool resolves rule_files relative to the test file's directory.
  const ProcessResult test = gpuslice::testing::Run({promtool, "test", "rules", dir + "/gpuslice-alerts.test.yaml"});
  EXPECT_EQ(test.exit_code, 0) << test.out << test.err;
}

}  // namespace
}  // namespace gpuslice::testing
