// Listeners and connectors over real sockets on 127.0.0.1 and abstract Unix names.
#include "net/socket_listener.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

#include "net/socket_connection.h"

namespace tandem::net {
namespace {

using std::chrono::milliseconds;

std::string UniqueUnixName(const char* what) {
  return std::string("tandem-test-") + what + "-" + std::to_string(getpid());
}

TEST(SocketListenerTest, TcpPortZeroPicksAPortThatAcceptsAndCarriesBytes) {
  StatusOr<std::unique_ptr<SocketListener>> listener = SocketListener::ListenTcp(
      "127.0.0.1", 0, {.tcp_nodelay = true, .tcp_send_buffer_bytes = 1 << 20});
  ASSERT_TRUE(listener.ok()) << listener.status().ToString();
  ASSERT_GT((*listener)->port(), 0);
  EXPECT_FALSE((*listener)->is_unix());

  StatusOr<std::unique_ptr<SocketConnection>> client = ConnectTcp("127.0.0.1", (*listener)->port());
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  StatusOr<UniqueFd> accepted = (*listener)->Accept(milliseconds(5000));
  ASSERT_TRUE(accepted.ok()) << accepted.status().ToString();
  SocketConnection server(std::move(accepted).value());

  ASSERT_TRUE((*client)->Send("hello", 5).ok());
  char got[5];
  ASSERT_TRUE(server.Recv(got, 5).ok());
  EXPECT_EQ(std::string(got, 5), "hello");
}

TEST(SocketListenerTest, AcceptTimesOutThenShutdownCancelsFromAnotherThread) {
  auto listener = SocketListener::ListenTcp("127.0.0.1", 0);
  ASSERT_TRUE(listener.ok());
  EXPECT_EQ((*listener)->Accept(milliseconds(50)).status().code(), StatusCode::kDeadlineExceeded);

  std::thread stopper([&] {
    std::this_thread::sleep_for(milliseconds(100));
    (*listener)->Shutdown();
  });
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ((*listener)->Accept().status().code(),
            StatusCode::kCancelled);  // no timeout: only Shutdown ends it
  stopper.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  // And every later call.
  EXPECT_EQ((*listener)->Accept(milliseconds(0)).status().code(), StatusCode::kCancelled);
}

TEST(SocketListenerTest, AnAddressInUseOrNotAnIpLiteralIsRefused) {
  auto first = SocketListener::ListenTcp("127.0.0.1", 0);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(SocketListener::ListenTcp("127.0.0.1", (*first)->port()).status().code(),
            StatusCode::kUnavailable);
  EXPECT_EQ(SocketListener::ListenTcp("not-an-ip", 0).status().code(),
            StatusCode::kInvalidArgument);

  const std::string name = UniqueUnixName("dup");
  auto unix_first = SocketListener::ListenUnix(name);
  ASSERT_TRUE(unix_first.ok()) << unix_first.status().ToString();
  StatusOr<std::unique_ptr<SocketListener>> again = SocketListener::ListenUnix(name);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(again.status().message().find("unix:@" + name), std::string::npos)
      << again.status().message();
}

TEST(SocketListenerTest, UnixListenerWithTheOwnerCheckServesThisUser) {
  const std::string name = UniqueUnixName("owner");
  auto listener = SocketListener::ListenUnix(name, {.require_owner_peer = true});
  ASSERT_TRUE(listener.ok()) << listener.status().ToString();
  EXPECT_TRUE((*listener)->is_unix());
  auto client = ConnectUnix(name, milliseconds(1000));
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  // The same uid (this process) passes the SO_PEERCRED check.
  StatusOr<UniqueFd> accepted = (*listener)->Accept(milliseconds(5000));
  ASSERT_TRUE(accepted.ok()) << accepted.status().ToString();
}

TEST(SocketListenerTest, ConnectFailuresHaveTheirCodes) {
  // A port with nothing listening: bind one, then close the listener.
  uint16_t port = 0;
  {
    auto listener = SocketListener::ListenTcp("127.0.0.1", 0);
    ASSERT_TRUE(listener.ok());
    port = (*listener)->port();
  }
  EXPECT_EQ(ConnectTcp("127.0.0.1", port).status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(ConnectTcp("no-such-host", 80).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ConnectUnix(UniqueUnixName("nobody-listens"), milliseconds(500)).status().code(),
            StatusCode::kUnavailable);
}

}  // namespace
}  // namespace tandem::net
