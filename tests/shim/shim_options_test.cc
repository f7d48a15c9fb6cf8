// The shim's options: every accepted form, and for each bad or unknown GPUSLICE_* variable one
// line naming the variable, the value and a valid example (the shim then fails closed).
#include "shim/options.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace gpuslice::shim {
namespace {

std::vector<char*> Environment(std::vector<std::string>& env) {
  std::vector<char*> pointers;
  for (auto& e : env) pointers.push_back(e.data());
  pointers.push_back(nullptr);
  return pointers;
}

Result<ShimOptions> Parse(std::vector<std::string> env) { return ParseOptions(Environment(env).data()); }

TEST(ShimOptionsTest, DefaultsMeanNoQuotaOwnTenantAndRunGpuslice) {
  const Result<ShimOptions> parsed = Parse({"PATH=/bin", "GPUSLICE_SIM_MEMORY=1Gi"});
  ASSERT_TRUE(parsed.ok()) << parsed.message();
  const ShimOptions& options = *parsed;
  EXPECT_FALSE(options.LimitFor(0).has_value());
  EXPECT_EQ(options.tenant, "");
  EXPECT_EQ(options.state_dir, "/run/gpuslice");
}

TEST(ShimOptionsTest, AcceptsQuantitiesPercentagesAndPerDeviceOverrides) {
  const Result<ShimOptions> parsed =
      Parse({"GPUSLICE_MEMORY_LIMIT=25%", "GPUSLICE_MEMORY_LIMIT_1=2Gi", "GPUSLICE_TENANT=team-a.svc_1",
             "GPUSLICE_STATE_DIR=/var/lib/gpuslice", "GPUSLICE_DRIVER_LIBRARY=/usr/lib/libcuda.so.1"});
  ASSERT_TRUE(parsed.ok()) << parsed.message();
  const ShimOptions& options = *parsed;
  EXPECT_EQ(options.LimitFor(0)->QuotaFor(4ULL << 30), 1ULL << 30);
  EXPECT_EQ(options.LimitFor(1)->QuotaFor(80ULL << 30), 2ULL << 30);
  EXPECT_EQ(options.tenant, "team-a.svc_1");
  EXPECT_EQ(options.state_dir, "/var/lib/gpuslice");
  for (const char* form : {"512Mi", "4Gi", "4G", "1048576", "1.5Gi", "4e9", "100%", "1%"}) {
    EXPECT_TRUE(ParseMemoryLimit(form).has_value()) << form;
  }
}

struct Bad {
  const char* assignment;
  const char* variable;
};

class ShimOptionsBadTest : public ::testing::TestWithParam<Bad> {};

TEST_P(ShimOptionsBadTest, IsRefusedWithOneLineNamingVariableValueAndExample) {
  const Result<ShimOptions> parsed = Parse({GetParam().assignment});
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().code(), Status::Code::kInvalidArgument);
  const std::string& error = parsed.message();
  const std::string assignment = GetParam().assignment;
  const std::string value = assignment.substr(assignment.find('=') + 1);
  EXPECT_NE(error.find(GetParam().variable), std::string::npos) << error;
  EXPECT_NE(error.find("'" + value + "'"), std::string::npos) << error;
  EXPECT_TRUE(error.find("e.g.") != std::string::npos || error.find("did you mean") != std::string::npos) << error;
  EXPECT_EQ(error.find('\n'), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(EveryVariable, ShimOptionsBadTest,
                         ::testing::Values(Bad{"GPUSLICE_MEMORY_LIMIT=lots", "GPUSLICE_MEMORY_LIMIT"},
                                           Bad{"GPUSLICE_MEMORY_LIMIT=0", "GPUSLICE_MEMORY_LIMIT"},
                                           Bad{"GPUSLICE_MEMORY_LIMIT=0%", "GPUSLICE_MEMORY_LIMIT"},
                                           Bad{"GPUSLICE_MEMORY_LIMIT=101%", "GPUSLICE_MEMORY_LIMIT"},
                                           Bad{"GPUSLICE_MEMORY_LIMIT=100m", "GPUSLICE_MEMORY_LIMIT"},  // 0.1 byte
                                           Bad{"GPUSLICE_MEMORY_LIMIT=", "GPUSLICE_MEMORY_LIMIT"},
                                           Bad{"GPUSLICE_MEMORY_LIMIT_0=-1", "GPUSLICE_MEMORY_LIMIT_0"},
                                           Bad{"GPUSLICE_MEMORY_LIMIT_99=1Gi", "GPUSLICE_MEMORY_LIMIT_99"},
                                           Bad{"GPUSLICE_TENANT=has space", "GPUSLICE_TENANT"},
                                           Bad{"GPUSLICE_TENANT=", "GPUSLICE_TENANT"},
                                           Bad{"GPUSLICE_STATE_DIR=relative/dir", "GPUSLICE_STATE_DIR"},
                                           Bad{"GPUSLICE_DRIVER_LIBRARY=libcuda.so.1", "GPUSLICE_DRIVER_LIBRARY"},
                                           Bad{"GPUSLICE_COMPUTE_CLASS=fast", "GPUSLICE_COMPUTE_CLASS"},
                                           Bad{"GPUSLICE_COMPUTE_CLASS=Latency", "GPUSLICE_COMPUTE_CLASS"},
                                           Bad{"GPUSLICE_COMPUTE_CLASS=", "GPUSLICE_COMPUTE_CLASS"},
                                           Bad{"GPUSLICE_MEMORY_LIMT=4Gi", "GPUSLICE_MEMORY_LIMT"}));

TEST(ShimOptionsTest, ComputeClassIsStandardUnlessOneOfTheThreeIsNamed) {
  const Result<ShimOptions> defaults = Parse({});
  ASSERT_TRUE(defaults.ok()) << defaults.message();
  EXPECT_EQ(defaults->compute_class, ComputeClass::kStandard);
  const std::pair<const char*, ComputeClass> classes[] = {{"latency", ComputeClass::kLatency},
                                                          {"standard", ComputeClass::kStandard},
                                                          {"background", ComputeClass::kBackground}};
  for (const auto& [text, expected] : classes) {
    const Result<ShimOptions> parsed = Parse({std::string("GPUSLICE_COMPUTE_CLASS=") + text});
    ASSERT_TRUE(parsed.ok()) << parsed.message();
    EXPECT_EQ(parsed->compute_class, expected) << text;
    EXPECT_STREQ(ComputeClassName(expected), text);
  }
}

TEST(ShimOptionsTest, ABadComputeClassNamesTheValidValues) {
  const Result<ShimOptions> parsed = Parse({"GPUSLICE_COMPUTE_CLASS=realtime"});
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.message(),
            "gpuslice: invalid GPUSLICE_COMPUTE_CLASS='realtime'; expected latency, standard or background, e.g. "
            "latency");
}

// Every declared option parses its own example and refuses a value that is none of its type,
// so no declaration can be left without a working parser.
TEST(ShimOptionsTest, EveryDeclarationAcceptsItsExampleAndRefusesGarbage) {
  for (const OptionSpec& spec : OptionTable()) {
    std::string name = spec.name;
    if (const size_t n = name.find("<n>"); n != std::string::npos) name.replace(n, 3, "1");
    const Result<ShimOptions> example = Parse({name + "=" + spec.example});
    EXPECT_TRUE(example.ok()) << example.message();
    const Result<ShimOptions> garbage = Parse({name + "=#garbage#"});
    ASSERT_FALSE(garbage.ok()) << name;
    const std::string& error = garbage.message();
    EXPECT_NE(error.find(std::string("expected ") + spec.type + ", e.g. " + spec.example), std::string::npos) << error;
  }
}

TEST(ShimOptionsTest, MisspeltVariableSuggestsTheRealOne) {
  const Result<ShimOptions> parsed = Parse({"GPUSLICE_MEMORY_LIMT=4Gi"});
  ASSERT_FALSE(parsed.ok());
  EXPECT_NE(parsed.message().find("did you mean GPUSLICE_MEMORY_LIMIT?"), std::string::npos) << parsed.message();
}

// The driver's loader still finds a valid GPUSLICE_DRIVER_LIBRARY beside a bad variable (cuInit
// is what then fails closed), and never a bad one.
TEST(ShimOptionsTest, ValidOptionsKeepTheValidVariablesBesideABadOne) {
  std::vector<std::string> env = {"GPUSLICE_MEMORY_LIMIT=lots", "GPUSLICE_DRIVER_LIBRARY=/opt/cuda/libcuda.so.1",
                                  "GPUSLICE_TENANT=has space"};
  ASSERT_FALSE(ParseOptions(Environment(env).data()).ok());
  const ShimOptions valid = ValidOptions(Environment(env).data());
  EXPECT_EQ(valid.driver_library, "/opt/cuda/libcuda.so.1");
  EXPECT_FALSE(valid.memory_limit.has_value());
  EXPECT_EQ(valid.tenant, "");
}

}  // namespace
}  // namespace gpuslice::shim
