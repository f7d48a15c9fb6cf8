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
  for (const char* bad : {"", "Gi", "-1", "1.5Gi", "1 Gi", "1gi", "1GiB", "abc", "12x", " 1", "1Mi "}) {
    EXPECT_FALSE(ParseByteQuantity(bad).has_value()) << bad;
  }
}

TEST(QuantityTest, RejectsOverflowInsteadOfWrapping) {
  EXPECT_EQ(ParseByteQuantity("18446744073709551615"), UINT64_MAX);
  EXPECT_FALSE(ParseByteQuantity("18446744073709551616").has_value());
  EXPECT_FALSE(ParseByteQuantity("17179869184Gi").has_value());
  EXPECT_FALSE(ParseUnsigned("99999999999999999999").has_value());
}

}  // namespace
}  // namespace gpuslice
