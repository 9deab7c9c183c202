#include "net/socket_error.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>

namespace tandem::net {
namespace {

TEST(SocketErrorStatus, TimeoutsAreDeadlineExceededTheRestUnavailable) {
  for (int err : {EAGAIN, EWOULDBLOCK, ETIMEDOUT}) {
    const Status s = SocketErrorStatus("receive", err);
    EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded) << err;
    EXPECT_EQ(s.message(), std::string("receive: ") + std::strerror(err) + " (timed out)");
  }
  const Status s = SocketErrorStatus("connect 10.0.0.1:80", ECONNREFUSED);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_EQ(s.message(), std::string("connect 10.0.0.1:80: ") + std::strerror(ECONNREFUSED));
}

}  // namespace
}  // namespace tandem::net
