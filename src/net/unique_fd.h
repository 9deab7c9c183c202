// UniqueFd: owns a file descriptor (a socket, a memfd) and closes it on destruction.
//
// Thread safety: like a unique_ptr: one owner; moving or resetting races with any other
// use of the same object.
#pragma once

namespace tandem::net {

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { Reset(); }
  UniqueFd(UniqueFd&& o) noexcept : fd_(o.Release()) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept {
    if (this != &o) Reset(o.Release());
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  // Gives up ownership: the caller closes the returned descriptor.
  int Release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }
  // Closes the descriptor held (if any) and takes `fd` (-1: none).
  void Reset(int fd = -1);

 private:
  int fd_ = -1;
};

}  // namespace tandem::net
