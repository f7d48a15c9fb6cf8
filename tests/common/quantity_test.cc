// Byte quantities as Kubernetes writes them, and plain integers.
#include "common/quantity.h"

#include <gtest/gtest.h>

namespace gpuslice {
namespace {

TEST(QuantityTest, AcceptsBinaryDecimalAndPlainForms) {
  EXPECT_EQ(ParseByteQuantity("512Mi"), 512ULL << 20);
  EXPECT_EQ(ParseByteQuantity("4Gi"), 4ULL << 30);
  EXPECT_EQ(ParseByteQuantity("4G"), 4'000'000'000ULL);
  EXPECT_EQ(ParseByteQuantity("1Ki"), 1024ULL);
  EXPECT_EQ(ParseByteQuantity("3k"), 3000ULL);
  EXPECT_EQ(ParseByteQuantity("2Ti"), 2ULL << 40);
  EXPECT_EQ(ParseByteQuantity("1048576"), 1048576ULL);
  EXPECT_EQ(ParseByteQuantity("0"), 0ULL);
}

TEST(QuantityTest, RejectsMalformedInput) {
  for (const char* bad : {"",  "Gi", "-1",   "1 Gi",  "1gi",   "1GiB", "abc",  "12x", " 1",  "1Mi ", ".",
                          "+", "1e", "1ee3", "1e3.5", "1.2.3", "e3",   "1Ki2", "--1", "1E+", "0x10"}) {
    EXPECT_FALSE(ParseByteQuantity(bad).has_value()) << bad;
  }
}

// Every form of the Kubernetes quantity grammar: what an API server may answer for a capacity.
TEST(QuantityTest, AcceptsEveryFormOfTheKubernetesGrammar) {
  EXPECT_EQ(ParseByteQuantity("1e9"), 1'000'000'000ULL);
  EXPECT_EQ(ParseByteQuantity("2E9"), 2'000'000'000ULL);
  EXPECT_EQ(ParseByteQuantity("1e+3"), 1000ULL);
  EXPECT_EQ(ParseByteQuantity("15e-1"), std::nullopt) << "1.5 bytes";
  EXPECT_EQ(ParseByteQuantity("150e-1"), 15ULL);
  EXPECT_EQ(ParseByteQuantity("1.5Gi"), 3ULL << 29);
  EXPECT_EQ(ParseByteQuantity(".5Ki"), 512ULL);
  EXPECT_EQ(ParseByteQuantity("2."), 2ULL);
  EXPECT_EQ(ParseByteQuantity("+4Gi"), 4ULL << 30);
  EXPECT_EQ(ParseByteQuantity("1Pi"), 1ULL << 50);
  EXPECT_EQ(ParseByteQuantity("15Ei"), 15ULL << 60);
  EXPECT_EQ(ParseByteQuantity("1P"), 1'000'000'000'000'000ULL);
  EXPECT_EQ(ParseByteQuantity("1E"), 1'000'000'000'000'000'000ULL) << "E alone is exa, not an exponent";
  EXPECT_EQ(ParseByteQuantity("2000m"), 2ULL);
  EXPECT_EQ(ParseByteQuantity("-0"), 0ULL);
  EXPECT_EQ(ParseByteQuantity("0.000e99999999999"), 0ULL);
}

TEST(QuantityTest, RefusesWhatIsNotAWholeNonNegativeNumberOfBytes) {
  for (const char* bad : {"100m", "1.5", "1e-3", "0.3Ki", "-1Gi", "-1e9", "1e-1000000", "15.999Ei"}) {
    EXPECT_FALSE(ParseByteQuantity(bad).has_value()) << bad;
  }
}

TEST(QuantityTest, RejectsOverflowInsteadOfWrapping) {
  EXPECT_EQ(ParseByteQuantity("18446744073709551615"), UINT64_MAX);
  EXPECT_FALSE(ParseByteQuantity("18446744073709551616").has_value());
  EXPECT_FALSE(ParseByteQuantity("17179869184Gi").has_value());
  EXPECT_FALSE(ParseByteQuantity("16Ei").has_value());
  EXPECT_FALSE(ParseByteQuantity("1e20").has_value());
  EXPECT_FALSE(ParseByteQuantity("1e999999999999999999999").has_value());
  EXPECT_EQ(ParseByteQuantity("184467440737095516150e-1"), UINT64_MAX);
  EXPECT_EQ(ParseByteQuantity("16777215.999999940395355224609375Ti"), UINT64_MAX - 65535);
  EXPECT_FALSE(ParseUnsigned("99999999999999999999").has_value());
}

}  // namespace
}  // namespace gpuslice
