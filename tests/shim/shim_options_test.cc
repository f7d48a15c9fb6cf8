// The shim's options: every accepted form, and for each bad or unknown GPUSLICE_* variable one
// line naming the variable, the value and a valid example (the shim then fails closed).
#include "shim/options.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace gpuslice::shim {
namespace {

bool Parse(std::vector<std::string> env, ShimOptions* out, std::string* error) {
  std::vector<char*> pointers;
  for (auto& e : env) pointers.push_back(e.data());
  pointers.push_back(nullptr);
  return ParseOptions(pointers.data(), out, error);
}

TEST(ShimOptionsTest, DefaultsMeanNoQuotaOwnTenantAndRunGpuslice) {
  ShimOptions options;
  std::string error;
  ASSERT_TRUE(Parse({"PATH=/bin", "GPUSLICE_SIM_MEMORY=1Gi"}, &options, &error)) << error;
  EXPECT_FALSE(options.LimitFor(0).has_value());
  EXPECT_EQ(options.tenant, "");
  EXPECT_EQ(options.state_dir, "/run/gpuslice");
}

TEST(ShimOptionsTest, AcceptsQuantitiesPercentagesAndPerDeviceOverrides) {
  ShimOptions options;
  std::string error;
  ASSERT_TRUE(Parse({"GPUSLICE_MEMORY_LIMIT=25%", "GPUSLICE_MEMORY_LIMIT_1=2Gi", "GPUSLICE_TENANT=team-a.svc_1",
                     "GPUSLICE_STATE_DIR=/var/lib/gpuslice", "GPUSLICE_DRIVER_LIBRARY=/usr/lib/libcuda.so.1"},
                    &options, &error))
      << error;
  EXPECT_EQ(options.LimitFor(0)->QuotaFor(4ULL << 30), 1ULL << 30);
  EXPECT_EQ(options.LimitFor(1)->QuotaFor(80ULL << 30), 2ULL << 30);
  EXPECT_EQ(options.tenant, "team-a.svc_1");
  EXPECT_EQ(options.state_dir, "/var/lib/gpuslice");
  for (const char* form : {"512Mi", "4Gi", "4G", "1048576", "100%", "1%"}) {
    EXPECT_TRUE(ParseMemoryLimit(form).has_value()) << form;
  }
}

struct Bad {
  const char* assignment;
  const char* variable;
};

class ShimOptionsBadTest : public ::testing::TestWithParam<Bad> {};

TEST_P(ShimOptionsBadTest, IsRefusedWithOneLineNamingVariableValueAndExample) {
  ShimOptions options;
  std::string error;
  EXPECT_FALSE(Parse({GetParam().assignment}, &options, &error));
  const std::string assignment = GetParam().assignment;
  const std::string value = assignment.substr(assignment.find('=') + 1);
  EXPECT_NE(error.find(GetParam().variable), std::string::npos) << error;
  EXPECT_NE(error.find("'" + value + "'"), std::string::npos) << error;
  EXPECT_TRUE(error.find("e.g.") != std::string::npos || error.find("did you mean") != std::string::npos) << error;
  EXPECT_EQ(error.find('\n'), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(
    EveryVariable, ShimOptionsBadTest,
    ::testing::Values(Bad{"GPUSLICE_MEMORY_LIMIT=lots", "GPUSLICE_MEMORY_LIMIT"},
                      Bad{"GPUSLICE_MEMORY_LIMIT=0", "GPUSLICE_MEMORY_LIMIT"},
                      Bad{"GPUSLICE_MEMORY_LIMIT=0%", "GPUSLICE_MEMORY_LIMIT"},
                      Bad{"GPUSLICE_MEMORY_LIMIT=101%", "GPUSLICE_MEMORY_LIMIT"},
                      Bad{"GPUSLICE_MEMORY_LIMIT=1.5Gi", "GPUSLICE_MEMORY_LIMIT"},
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
  ShimOptions options;
  std::string error;
  ASSERT_TRUE(Parse({}, &options, &error)) << error;
  EXPECT_EQ(options.compute_class, ComputeClass::kStandard);
  const std::pair<const char*, ComputeClass> classes[] = {{"latency", ComputeClass::kLatency},
                                                          {"standard", ComputeClass::kStandard},
                                                          {"background", ComputeClass::kBackground}};
  for (const auto& [text, expected] : classes) {
    ASSERT_TRUE(Parse({std::string("GPUSLICE_COMPUTE_CLASS=") + text}, &options, &error)) << error;
    EXPECT_EQ(options.compute_class, expected) << text;
    EXPECT_STREQ(ComputeClassName(expected), text);
  }
}

TEST(ShimOptionsTest, ABadComputeClassNamesTheValidValues) {
  ShimOptions options;
  std::string error;
  ASSERT_FALSE(Parse({"GPUSLICE_COMPUTE_CLASS=realtime"}, &options, &error));
  EXPECT_EQ(error,
            "gpuslice: invalid GPUSLICE_COMPUTE_CLASS='realtime'; expected latency, standard or background, e.g. "
            "latency");
}

// Every declared option parses its own example and refuses a value that is none of its type,
// so no declaration can be left without a working parser.
TEST(ShimOptionsTest, EveryDeclarationAcceptsItsExampleAndRefusesGarbage) {
  for (const OptionSpec& spec : OptionTable()) {
    std::string name = spec.name;
    if (const size_t n = name.find("<n>"); n != std::string::npos) name.replace(n, 3, "1");
    ShimOptions options;
    std::string error;
    EXPECT_TRUE(Parse({name + "=" + spec.example}, &options, &error)) << error;
    EXPECT_FALSE(Parse({name + "=#garbage#"}, &options, &error)) << name;
    EXPECT_NE(error.find(std::string("expected ") + spec.type + ", e.g. " + spec.example), std::string::npos) << error;
  }
}

TEST(ShimOptionsTest, MisspeltVariableSuggestsTheRealOne) {
  ShimOptions options;
  std::string error;
  EXPECT_FALSE(Parse({"GPUSLICE_MEMORY_LIMT=4Gi"}, &options, &error));
  EXPECT_NE(error.find("did you mean GPUSLICE_MEMORY_LIMIT?"), std::string::npos) << error;
}

}  // namespace
}  // namespace gpuslice::shim
