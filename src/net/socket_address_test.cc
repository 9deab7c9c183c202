#include "net/socket_address.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/un.h>

#include <cstddef>
#include <string>

#include "net/secret_equals.h"

namespace tandem::net {
namespace {

TEST(SocketAddressTest, ParseHostPortTakesIpv4AndAPortOnly) {
  StatusOr<HostPort> hp = ParseHostPort("10.1.2.3:8100");
  ASSERT_TRUE(hp.ok()) << hp.status().ToString();
  EXPECT_EQ(hp->host, "10.1.2.3");
  EXPECT_EQ(hp->port, 8100);
  EXPECT_EQ(hp->ToString(), "10.1.2.3:8100");
  for (const char* bad :
       {"10.1.2.3", ":80", "10.1.2.3:0", "10.1.2.3:65536", "10.1.2.3:8x", "host:80", "::1:80"}) {
    EXPECT_EQ(ParseHostPort(bad).status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

TEST(SocketAddressTest, Loopback) {
  EXPECT_TRUE(IsLoopbackHost("127.0.0.1"));
  EXPECT_TRUE(IsLoopbackHost("127.8.9.10"));
  EXPECT_TRUE(IsLoopbackHost("localhost"));
  EXPECT_TRUE(IsLoopbackHost("::1"));
  EXPECT_FALSE(IsLoopbackHost("128.0.0.1"));
  EXPECT_FALSE(IsLoopbackHost("10.0.0.1"));
  EXPECT_FALSE(IsLoopbackHost("example"));
}

TEST(SocketAddressTest, IpLiteralsOfBothFamilies) {
  StatusOr<SocketAddress> v4 = SocketAddress::Ip("localhost", 80);
  ASSERT_TRUE(v4.ok());
  EXPECT_EQ(v4->family, AF_INET);
  EXPECT_EQ(v4->length, sizeof(sockaddr_in));
  EXPECT_EQ(ntohs(reinterpret_cast<const sockaddr_in*>(v4->get())->sin_port), 80);
  EXPECT_EQ(v4->description, "127.0.0.1:80");

  StatusOr<SocketAddress> v6 = SocketAddress::Ip("::1", 443);
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ(v6->family, AF_INET6);
  EXPECT_EQ(v6->length, sizeof(sockaddr_in6));

  EXPECT_EQ(SocketAddress::Ip("example.com", 80).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(SocketAddress::Ip("1.2.3", 80).status().code(), StatusCode::kInvalidArgument);
}

TEST(SocketAddressTest, AbstractUnixNamesStartWithNulAndHaveAnExactLength) {
  SocketAddress a = SocketAddress::AbstractUnix("tandem-kv-8100");
  const auto* un = reinterpret_cast<const sockaddr_un*>(a.get());
  EXPECT_EQ(a.family, AF_UNIX);
  EXPECT_EQ(un->sun_path[0], '\0');
  EXPECT_EQ(std::string(un->sun_path + 1, 14), "tandem-kv-8100");
  EXPECT_EQ(a.length, offsetof(sockaddr_un, sun_path) + 1 + 14);
  EXPECT_EQ(a.description, "unix:@tandem-kv-8100");
  // Too long for sun_path: cut to fit, never past the end.
  SocketAddress long_name = SocketAddress::AbstractUnix(std::string(500, 'x'));
  EXPECT_EQ(long_name.length, sizeof(sockaddr_un));
}

TEST(SecretEqualsTest, ComparesWholeContents) {
  EXPECT_TRUE(SecretEquals("s3cret", "s3cret"));
  EXPECT_TRUE(SecretEquals("", ""));
  EXPECT_FALSE(SecretEquals("s3cres", "s3cret"));
  EXPECT_FALSE(SecretEquals("s3cret!", "s3cret"));
  EXPECT_FALSE(SecretEquals("", "s3cret"));
}

}  // namespace
}  // namespace tandem::net
