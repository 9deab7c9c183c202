#include "common/peer_credentials.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>
#include <string>

namespace tandem {
namespace {

TEST(PeerCredentials, SameUserIsAllowed) {
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  StatusOr<uid_t> uid = UnixPeerUid(fds[0]);
  ASSERT_TRUE(uid.ok()) << uid.status().ToString();
  EXPECT_EQ(*uid, geteuid());
  EXPECT_TRUE(CheckUnixPeerIsOwner(fds[0]).ok());
  close(fds[0]);
  close(fds[1]);
}

TEST(PeerCredentials, NotAUnixSocketIsAnError) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  EXPECT_FALSE(UnixPeerUid(fds[0]).ok());
  EXPECT_FALSE(CheckUnixPeerIsOwner(fds[0]).ok());
  close(fds[0]);
  close(fds[1]);
}

// As root, a child that drops to another uid connects to an abstract socket of this
// process: the listener must refuse it.
TEST(PeerCredentials, OtherUserIsRefused) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to run a peer as another uid";
  const int listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(listener, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string name =
      std::string(1, '\0') + "tandem-peer-cred-test-" + std::to_string(getpid());
  std::memcpy(addr.sun_path, name.data(), name.size());
  const auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name.size());
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&addr), len), 0);
  ASSERT_EQ(listen(listener, 1), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (setgid(65534) != 0 || setuid(65534) != 0) _exit(2);
    const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0) _exit(3);
    char byte;
    (void)!read(fd, &byte, 1);  // until the parent has checked and closed
    _exit(0);
  }
  const int conn = accept(listener, nullptr, nullptr);
  ASSERT_GE(conn, 0);
  StatusOr<uid_t> uid = UnixPeerUid(conn);
  ASSERT_TRUE(uid.ok());
  EXPECT_EQ(*uid, 65534u);
  EXPECT_EQ(CheckUnixPeerIsOwner(conn).code(), StatusCode::kPermissionDenied);
  close(conn);
  close(listener);
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

}  // namespace
}  // namespace tandem
