// Status and Result<T> (common/status.h): what the broker and the tools return instead of
// bool + std::string*, int -1 or a variant.
#include "common/status.h"

#include <memory>
#include <string>

#include <gtest/gtest.h>

namespace gpuslice {
namespace {

TEST(StatusTest, DefaultAndOkAreSuccessWithoutMessage) {
  const Status a;
  const Status b = Status::Ok();
  EXPECT_TRUE(a.ok());
  EXPECT_TRUE(b.ok());
  EXPECT_EQ(b.code(), Status::Code::kOk);
  EXPECT_EQ(b.message(), "");
}

TEST(StatusTest, ErrorKeepsItsLineAndCode) {
  const Status s = Status::Error("gpuslice: no such file");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Status::Code::kError);
  EXPECT_EQ(s.message(), "gpuslice: no such file");
  EXPECT_EQ(Status::NotFound("x").code(), Status::Code::kNotFound);
  EXPECT_EQ(Status::ResourceExhausted("x").code(), Status::Code::kResourceExhausted);
  EXPECT_EQ(Status::PermissionDenied("x").code(), Status::Code::kPermissionDenied);
  EXPECT_EQ(Status::InvalidArgument("x").code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(Status::Unavailable("x").code(), Status::Code::kUnavailable);
}

TEST(StatusTest, AnErrorCannotBeMadeToReadAsSuccess) {
  const Status s = Status::Error(Status::Code::kOk, "failed");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Status::Code::kError);
}

TEST(ResultTest, HoldsAValue) {
  Result<int> r = 7;
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r.status().ok());
  EXPECT_EQ(r.value(), 7);
  EXPECT_EQ(*r, 7);
  EXPECT_EQ(r.value_or(-1), 7);
}

TEST(ResultTest, HoldsTheErrorWhenThereIsNoValue) {
  Result<int> r = Status::NotFound("no ledger");
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kNotFound);
  EXPECT_EQ(r.message(), "no ledger");
  EXPECT_EQ(r.value_or(-1), -1);
}

TEST(ResultTest, MovesOutMoveOnlyValues) {
  Result<std::unique_ptr<std::string>> r = std::make_unique<std::string>("segment");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->get()->size(), 7u);
  std::unique_ptr<std::string> taken = std::move(r).value();
  ASSERT_NE(taken, nullptr);
  EXPECT_EQ(*taken, "segment");
}

TEST(ResultTest, StatusCanBeMovedOnToTheCaller) {
  auto inner = []() -> Result<std::string> { return Status::InvalidArgument("bad quota"); };
  auto outer = [&]() -> Status {
    Result<std::string> r = inner();
    if (!r.ok()) return std::move(r).status();
    return Status::Ok();
  };
  const Status s = outer();
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(s.message(), "bad quota");
}

}  // namespace
}  // namespace gpuslice
