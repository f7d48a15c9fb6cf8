#include <gtest/gtest.h>

#include <cstring>

#include "broker/uuid.h"

namespace gpuslice::broker {
namespace {

constexpr uint8_t kBytes[16] = {0x5f, 0x3a, 0x00, 0x9c, 0x12, 0x34, 0xab, 0xcd,
                                0xef, 0x01, 0x23, 0x45, 0x67, 0x89, 0xfe, 0xdc};

TEST(BrokerUuidTest, FormatsAsNvidiaSmiPrintsIt) {
  EXPECT_EQ(FormatUuid(kBytes), "GPU-5f3a009c-1234-abcd-ef01-23456789fedc");
}

TEST(BrokerUuidTest, ParseInvertsFormat) {
  uint8_t parsed[16] = {};
  ASSERT_TRUE(ParseUuid(FormatUuid(kBytes), parsed));
  EXPECT_EQ(std::memcmp(parsed, kBytes, 16), 0);
}

TEST(BrokerUuidTest, ParseAcceptsUppercaseHex) {
  uint8_t parsed[16] = {};
  ASSERT_TRUE(ParseUuid("GPU-5F3A009C-1234-ABCD-EF01-23456789FEDC", parsed));
  EXPECT_EQ(std::memcmp(parsed, kBytes, 16), 0);
}

TEST(BrokerUuidTest, ParseRejectsMalformedTextAndLeavesOutputAlone) {
  uint8_t parsed[16] = {};
  for (const char* bad : {"", "GPU-", "5f3a009c-1234-abcd-ef01-23456789fedc", "GPU-5f3a009c-1234-abcd-ef01-23456789fed",
                          "GPU-5f3a009c-1234-abcd-ef01-23456789fedcc", "GPU-5f3a009c_1234-abcd-ef01-23456789fedc",
                          "GPU-5f3a009g-1234-abcd-ef01-23456789fedc", "MIG-5f3a009c-1234-abcd-ef01-23456789fedc"}) {
    EXPECT_FALSE(ParseUuid(bad, parsed)) << bad;
  }
  for (uint8_t byte : parsed) EXPECT_EQ(byte, 0);
}

}  // namespace
}  // namespace gpuslice::broker
