#include "common/status.h"

#include <gtest/gtest.h>

namespace tandem {
namespace {

StatusOr<int> ParsePositive(int v) {
  if (v <= 0) return InvalidArgumentError("not positive: " + std::to_string(v));
  return v;
}

Status UseParse(int v, int* out) {
  TANDEM_ASSIGN_OR_RETURN(*out, ParsePositive(v));
  return Status::Ok();
}

TEST(StatusTest, OkAndErrors) {
  EXPECT_TRUE(Status::Ok().ok());
  Status s = NotFoundError("x");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(s.ToString(), "NOT_FOUND: x");
  EXPECT_EQ(s.WithContext("loading").message(), "loading: x");
}

TEST(StatusTest, AssignOrReturnPropagates) {
  int out = 0;
  EXPECT_TRUE(UseParse(3, &out).ok());
  EXPECT_EQ(out, 3);
  Status s = UseParse(-1, &out);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(out, 3);
}

}  // namespace
}  // namespace tandem
