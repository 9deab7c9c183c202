// Frames, descriptor passing and the fault-injecting decorator over a real socketpair.
#include "net/framed_socket.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "net/faulty_connection.h"

namespace tandem::net {
namespace {

using std::chrono::milliseconds;

// A toy protocol: 'F', then the body length in 3 little-endian bytes.
constexpr size_t kHeader = 4;
void Header(uint32_t length, uint8_t out[kHeader]) {
  out[0] = 'F';
  out[1] = length & 0xFF;
  out[2] = (length >> 8) & 0xFF;
  out[3] = (length >> 16) & 0xFF;
}
StatusOr<uint32_t> BodyLength(std::span<const uint8_t> h) {
  if (h[0] != 'F') return InvalidArgumentError("bad magic");
  return static_cast<uint32_t>(h[1] | (h[2] << 8) | (h[3] << 16));
}

class FramedSocketTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int fds[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
    a_ = std::make_unique<SocketConnection>(UniqueFd(fds[0]));
    b_ = std::make_unique<SocketConnection>(UniqueFd(fds[1]));
    ASSERT_TRUE(a_->SetIoTimeout(milliseconds(2000)).ok());
    ASSERT_TRUE(b_->SetIoTimeout(milliseconds(2000)).ok());
  }

  Status Recv(Connection& conn, std::string* body, UniqueFd* fd = nullptr, uint32_t max = 1 << 20) {
    uint8_t h[kHeader];
    return RecvFrame(conn, h, BodyLength, max, body, fd);
  }

  std::unique_ptr<SocketConnection> a_;
  std::unique_ptr<SocketConnection> b_;
};

TEST_F(FramedSocketTest, PartsArriveAsOneBodyAndEmptyBodiesWork) {
  uint8_t h[kHeader];
  Header(11, h);
  const std::vector<std::string_view> parts = {"hello", "", " world"};
  ASSERT_TRUE(SendFrame(*a_, h, parts).ok());
  Header(0, h);
  ASSERT_TRUE(SendFrame(*a_, h, std::string_view()).ok());
  std::string body;
  ASSERT_TRUE(Recv(*b_, &body).ok());
  EXPECT_EQ(body, "hello world");
  ASSERT_TRUE(Recv(*b_, &body).ok());
  EXPECT_EQ(body, "");
}

TEST_F(FramedSocketTest, TheHeaderVerdictAndTheLengthLimitComeBeforeTheBody) {
  const uint8_t bad[kHeader] = {'X', 1, 0, 0};
  ASSERT_TRUE(a_->Send(bad, kHeader).ok());
  std::string body;
  Status s = Recv(*b_, &body);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "bad magic");

  uint8_t h[kHeader];
  Header(1000, h);  // announces 1000 bytes; none follow, and none are waited for
  ASSERT_TRUE(a_->Send(h, kHeader).ok());
  s = Recv(*b_, &body, nullptr, /*max=*/999);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("exceeds the limit of 999"), std::string::npos) << s.message();
}

TEST_F(FramedSocketTest, APeerThatClosesMidBodyIsUnavailableAndASilentOneTimesOut) {
  std::string body;
  EXPECT_EQ(Recv(*b_, &body).code(), StatusCode::kDeadlineExceeded) << "nothing sent yet";
  ASSERT_TRUE(b_->SetIoTimeout(milliseconds(100)).ok());
  uint8_t h[kHeader];
  Header(10, h);
  ASSERT_TRUE(a_->Send(h, kHeader).ok());
  ASSERT_TRUE(a_->Send("abc", 3).ok());
  a_->Shutdown();
  EXPECT_EQ(Recv(*b_, &body).code(), StatusCode::kUnavailable);
}

TEST_F(FramedSocketTest, ADescriptorTravelsWithTheHeader) {
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  UniqueFd read_end(pipe_fds[0]);
  UniqueFd write_end(pipe_fds[1]);
  uint8_t h[kHeader];
  Header(4, h);
  ASSERT_TRUE(SendFrame(*a_, h, "body", write_end.get()).ok());
  std::string body;
  UniqueFd passed;
  ASSERT_TRUE(Recv(*b_, &body, &passed).ok());
  EXPECT_EQ(body, "body");
  ASSERT_TRUE(passed.valid());
  EXPECT_NE(passed.get(), write_end.get());  // a copy of its own
  EXPECT_TRUE(fcntl(passed.get(), F_GETFD) & FD_CLOEXEC);
  // It is the pipe's write end: bytes written through it come out of the read end.
  ASSERT_EQ(write(passed.get(), "x", 1), 1);
  char c = 0;
  ASSERT_EQ(read(read_end.get(), &c, 1), 1);
  EXPECT_EQ(c, 'x');

  // Not asked for: the frame still reads, with no descriptor.
  ASSERT_TRUE(SendFrame(*a_, h, "next", write_end.get()).ok());
  ASSERT_TRUE(Recv(*b_, &body).ok());
  EXPECT_EQ(body, "next");
}

TEST_F(FramedSocketTest, FaultyConnectionFailsOrCorruptsAtTheChosenByte) {
  uint8_t h[kHeader];
  Header(5, h);
  ASSERT_TRUE(SendFrame(*a_, h, "abcde").ok());
  ASSERT_TRUE(SendFrame(*a_, h, "abcde").ok());
  FaultPlan corrupt;
  corrupt.corrupt_recv_byte_at = kHeader + 2;  // the 'c' of the first body
  FaultyConnection faulty(std::move(b_), corrupt);
  std::string body;
  ASSERT_TRUE(Recv(faulty, &body).ok());
  EXPECT_EQ(body, std::string("ab") + static_cast<char>('c' ^ 0xFF) + "de");
  ASSERT_TRUE(Recv(faulty, &body).ok());
  EXPECT_EQ(body, "abcde");  // once only
}

TEST_F(FramedSocketTest, FaultyConnectionBreaksTheStreamAfterNBytes) {
  uint8_t h[kHeader];
  Header(5, h);
  ASSERT_TRUE(SendFrame(*a_, h, "abcde").ok());
  ASSERT_TRUE(SendFrame(*a_, h, "abcde").ok());
  FaultPlan plan;
  plan.fail_after_recv_bytes = kHeader + 5 + 2;  // inside the second header
  FaultyConnection faulty(std::move(b_), plan);
  std::string body;
  ASSERT_TRUE(Recv(faulty, &body).ok());
  EXPECT_EQ(Recv(faulty, &body).code(), StatusCode::kUnavailable);
  // The inner connection was shut down: the sender sees it too.
  uint8_t more[kHeader];
  Header(0, more);
  Status s = Status::Ok();
  for (int i = 0; i < 100 && s.ok(); ++i) s = a_->Send(more, kHeader);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
}

}  // namespace
}  // namespace tandem::net
