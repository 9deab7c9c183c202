#include "net/host_address.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>

namespace tandem::net {
namespace {

TEST(HostAddress, InterfaceByName) {
  auto lo = InterfaceIpv4Address({.name = "lo"});
  ASSERT_TRUE(lo.ok()) << lo.status().ToString();
  EXPECT_EQ(*lo, "127.0.0.1");
  EXPECT_EQ(InterfaceIpv4Address({.name = "lo", .skip_down_and_loopback = true}).status().code(),
            StatusCode::kNotFound);
  EXPECT_EQ(InterfaceIpv4Address({.name = "no-such-if0"}).status().code(), StatusCode::kNotFound);
}

TEST(HostAddress, DefaultAdvertiseAddressPrefersVllmHostIp) {
  ::setenv("VLLM_HOST_IP", "10.1.2.3", 1);
  EXPECT_EQ(DefaultAdvertiseAddress(), "10.1.2.3");
  ::unsetenv("VLLM_HOST_IP");
  const std::string ip = DefaultAdvertiseAddress();
  EXPECT_EQ(std::count(ip.begin(), ip.end(), '.'), 3) << ip;
}

TEST(HostAddress, HostnameAddressIsAnIpv4Literal) {
  const std::string ip = HostnameAddress();
  EXPECT_EQ(std::count(ip.begin(), ip.end(), '.'), 3) << ip;
}

TEST(HostAddress, RouteSourceAddress) {
  auto self = RouteSourceAddress("127.0.0.1", "--peer");
  ASSERT_TRUE(self.ok()) << self.status().ToString();
  EXPECT_EQ(*self, "127.0.0.1");
  const Status bad = RouteSourceAddress("not-an-ip", "--peer").status();
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.message(), "--peer not-an-ip is not an IPv4 address");
}

}  // namespace
}  // namespace tandem::net
