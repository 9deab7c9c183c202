// Test-only helpers of the dist tests.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>

#include "net/socket_listener.h"

namespace tandem::dist {

// A port nothing listens on right now on 127.0.0.1 (bound, read, closed).
inline uint16_t FreePort() {
  auto l = net::SocketListener::ListenTcp("127.0.0.1", 0);
  EXPECT_TRUE(l.ok());
  return l.ok() ? (*l)->port() : 0;
}

}  // namespace tandem::dist
